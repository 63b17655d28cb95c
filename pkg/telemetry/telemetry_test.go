package telemetry_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	metricscollector "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/telemetry"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// Nothing is exported unless the environment names an endpoint or the
// otlp exporter, and the SDK switch turns it off.
func TestEnabled(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_SERVICE_NAME": "x"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
	} {
		if got := telemetry.Enabled(env(c.env)); got != c.want {
			t.Errorf("Enabled(%v) = %v, want %v", c.env, got, c.want)
		}
	}
	if _, on, err := telemetry.Setup(context.Background(), telemetry.Config{Getenv: env(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})}); !errors.Is(err, telemetry.ErrProtocol) || on {
		t.Errorf("http/json: on=%v err=%v, want ErrProtocol", on, err)
	}
}

// The W3C header a span context becomes, and back: the example of the
// trace-context specification.
func TestInjectExtract(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	in := &events.Envelope{TraceParent: tp, TraceState: "congo=t61rcWkgMzE"}
	ctx := telemetry.Extract(context.Background(), in)
	sc := trace.SpanContextFromContext(ctx)
	if sc.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || sc.SpanID().String() != "b7ad6b7169203331" || !sc.IsSampled() || !sc.IsRemote() {
		t.Fatalf("extracted %+v", sc)
	}
	var out events.Envelope
	telemetry.Inject(ctx, &out)
	if out.TraceParent != tp || out.TraceState != "congo=t61rcWkgMzE" {
		t.Errorf("injected %q %q", out.TraceParent, out.TraceState)
	}
	h := http.Header{}
	telemetry.InjectHTTP(ctx, h)
	if h.Get("traceparent") != tp {
		t.Errorf("HTTP traceparent %q", h.Get("traceparent"))
	}
	// No span context: nothing written; a malformed one: nothing read.
	var none events.Envelope
	telemetry.Inject(context.Background(), &none)
	if none.TraceParent != "" {
		t.Errorf("injected %q without a span", none.TraceParent)
	}
	bad := telemetry.Extract(context.Background(), &events.Envelope{TraceParent: "00-zz-b7ad6b7169203331-01"})
	if trace.SpanContextFromContext(bad).IsValid() {
		t.Error("a malformed traceparent was accepted")
	}
}

// Setup exports over OTLP/HTTP and over gRPC to a receiver that decodes
// the requests with the official OTLP protobuf types.
func TestSetupExports(t *testing.T) {
	t.Run("http/protobuf", func(t *testing.T) {
		var mu sync.Mutex
		var got []*collector.ExportTraceServiceRequest
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			var req collector.ExportTraceServiceRequest
			if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
				t.Errorf("export %s: %d bytes that are no ExportTraceServiceRequest", r.URL.Path, len(body))
			}
			mu.Lock()
			got = append(got, &req)
			mu.Unlock()
			w.Header().Set("Content-Type", "application/x-protobuf")
		}))
		defer srv.Close()
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
		exportOne(t, func() []*collector.ExportTraceServiceRequest {
			mu.Lock()
			defer mu.Unlock()
			return got
		})
	})
	t.Run("grpc", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		rcv := &receiver{}
		gs := grpc.NewServer()
		collector.RegisterTraceServiceServer(gs, rcv)
		go func() { _ = gs.Serve(ln) }()
		defer gs.Stop()
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+ln.Addr().String())
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
		exportOne(t, rcv.requests)
	})
}

func exportOne(t *testing.T, received func() []*collector.ExportTraceServiceRequest) {
	t.Helper()
	t.Setenv("OTEL_SERVICE_NAME", "from-env")
	prev := otel.GetTracerProvider()
	defer otel.SetTracerProvider(prev)
	shutdown, on, err := telemetry.Setup(context.Background(), telemetry.Config{Service: "llmw-test", Instance: "i1"})
	if err != nil || !on {
		t.Fatalf("Setup: on=%v err=%v", on, err)
	}
	_, span := telemetry.Tracer().Start(context.Background(), "chat m")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	var names []string
	service := ""
	for _, req := range received() {
		for _, rs := range req.ResourceSpans {
			for _, a := range rs.Resource.Attributes {
				if a.Key == "service.name" {
					service = a.Value.GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				if ss.Scope.Name != telemetry.Scope {
					t.Errorf("scope %q", ss.Scope.Name)
				}
				for _, s := range ss.Spans {
					names = append(names, s.Name)
				}
			}
		}
	}
	if strings.Join(names, ",") != "chat m" || service != "from-env" {
		t.Errorf("received spans %v of service %q, want [chat m] of from-env (OTEL_SERVICE_NAME wins)", names, service)
	}
}

type receiver struct {
	collector.UnimplementedTraceServiceServer
	mu  sync.Mutex
	got []*collector.ExportTraceServiceRequest
}

func (r *receiver) Export(_ context.Context, req *collector.ExportTraceServiceRequest) (*collector.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, req)
	return &collector.ExportTraceServiceResponse{}, nil
}

func (r *receiver) requests() []*collector.ExportTraceServiceRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got
}

// With an OTLP endpoint the metrics are pushed too (here at shutdown),
// and served as Prometheus text either way.
func TestSetupMetricsPushesOTLP(t *testing.T) {
	var mu sync.Mutex
	var names []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req metricscollector.ExportMetricsServiceRequest
		if r.URL.Path != "/v1/metrics" || proto.Unmarshal(body, &req) != nil {
			t.Errorf("export %s: %d bytes that are no ExportMetricsServiceRequest", r.URL.Path, len(body))
		}
		mu.Lock()
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					names = append(names, m.Name)
				}
			}
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	prev := otel.GetMeterProvider()
	defer otel.SetMeterProvider(prev)
	m, err := telemetry.SetupMetrics(context.Background(), telemetry.Config{Service: "llmw-test"})
	if err != nil || !m.OTLP {
		t.Fatalf("SetupMetrics: %v (otlp %v)", err, m != nil && m.OTLP)
	}
	telemetry.RecordTurn(context.Background(), "completed", "")
	rec := httptest.NewRecorder()
	m.Handler.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), `llmw_turns_total{llmw_turn_status="completed"`) {
		t.Errorf("/metrics lacks the turn counter:\n%s", rec.Body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(names, telemetry.MetricTurns) {
		t.Errorf("pushed metrics %v lack %s", names, telemetry.MetricTurns)
	}
}
