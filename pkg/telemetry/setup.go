package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/llmworker/llmworker/internal/leaf/version"
)

// Config names the process for Setup. The OTEL_* environment variables
// override it (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES).
type Config struct {
	// Service is service.name's default, e.g. "llmw-turn".
	Service string
	// Instance is service.instance.id (the replica name).
	Instance string
	// Getenv reads the environment; nil means os.Getenv. The exporters
	// read their own OTEL_EXPORTER_OTLP_* settings from the process
	// environment.
	Getenv func(string) string
}

// ErrProtocol is returned by Setup for an OTEL_EXPORTER_OTLP_PROTOCOL it
// does not export (it exports grpc and http/protobuf).
var ErrProtocol = errors.New("telemetry: unsupported OTLP protocol")

// Enabled reports whether the environment asks for trace export: an OTLP
// endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or OTEL_TRACES_EXPORTER=otlp, and
// neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	switch strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")) {
	case "none":
		return false
	case "otlp":
		return true
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup installs, when the environment asks for it (Enabled), a global
// SDK tracer provider exporting OTLP over HTTP (http/protobuf, the
// default) or gRPC (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or
// OTEL_EXPORTER_OTLP_PROTOCOL = grpc), with the sampler of
// OTEL_TRACES_SAMPLER, and the W3C trace-context and baggage propagators.
// It returns the function that flushes and stops the export (call it when
// the process ends; it is a no-op when nothing was installed) and whether
// tracing is on. With tracing on, spans record message content when
// EnvCaptureContent is "true" (SetCaptureContent). ctx bounds the
// exporter's setup only.
func Setup(ctx context.Context, c Config) (shutdown func(context.Context) error, on bool, err error) {
	getenv := c.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	noop := func(context.Context) error { return nil }
	if !Enabled(getenv) {
		return noop, false, nil
	}
	SetCaptureContent(captureFromEnv(getenv))
	proto := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	if proto == "" {
		proto = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	var exp sdktrace.SpanExporter
	switch proto {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return noop, false, fmt.Errorf("%w %q (want grpc or http/protobuf)", ErrProtocol, proto)
	}
	if err != nil {
		return noop, false, fmt.Errorf("telemetry: OTLP exporter: %w", err)
	}
	res, err := newResource(ctx, c)
	if err != nil {
		return noop, false, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return tp.Shutdown, true, nil
}

// newResource describes the process: service.name, service.instance.id
// and service.version, overridden by OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES.
func newResource(ctx context.Context, c Config) (*resource.Resource, error) {
	attrs := []attribute.KeyValue{semconv.ServiceVersion(version.String())}
	if c.Service != "" {
		attrs = append(attrs, semconv.ServiceName(c.Service))
	}
	if c.Instance != "" {
		attrs = append(attrs, semconv.ServiceInstanceID(c.Instance))
	}
	// Later options win: the environment overrides the defaults.
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithAttributes(attrs...), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return res, nil
}

// MetricsEnabled reports whether the environment asks for metrics to be
// pushed over OTLP: an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_METRICS_ENDPOINT) or OTEL_METRICS_EXPORTER=otlp, and
// neither OTEL_SDK_DISABLED=true nor OTEL_METRICS_EXPORTER=none.
func MetricsEnabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	switch strings.TrimSpace(getenv("OTEL_METRICS_EXPORTER")) {
	case "none":
		return false
	case "otlp":
		return true
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") != ""
}

// Metrics is what SetupMetrics installed.
type Metrics struct {
	// Handler serves every llmworker metric as Prometheus text: mount it
	// on /metrics.
	Handler http.Handler
	// OTLP is true when the metrics are also pushed over OTLP.
	OTLP bool

	provider *sdkmetric.MeterProvider
}

// Shutdown pushes the last OTLP export (if any) and stops the provider.
func (m *Metrics) Shutdown(ctx context.Context) error { return m.provider.Shutdown(ctx) }

// SetupMetrics installs a global SDK meter provider whose metrics Handler
// serves as Prometheus text and that, when the environment asks for it
// (MetricsEnabled), also pushes them over OTLP (HTTP by default, gRPC with
// OTEL_EXPORTER_OTLP_METRICS_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL =
// grpc; every OTEL_METRIC_EXPORT_INTERVAL, default 60 s). ctx bounds the
// exporter's setup only.
func SetupMetrics(ctx context.Context, c Config) (*Metrics, error) {
	getenv := c.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	res, err := newResource(ctx, c)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	prom, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	opts := []sdkmetric.Option{sdkmetric.WithResource(res), sdkmetric.WithReader(prom)}
	m := &Metrics{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	if MetricsEnabled(getenv) {
		proto := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"))
		if proto == "" {
			proto = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
		}
		var exp sdkmetric.Exporter
		switch proto {
		case "", "http/protobuf":
			exp, err = otlpmetrichttp.New(ctx)
		case "grpc":
			exp, err = otlpmetricgrpc.New(ctx)
		default:
			return nil, fmt.Errorf("%w %q (want grpc or http/protobuf)", ErrProtocol, proto)
		}
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTLP metric exporter: %w", err)
		}
		opts = append(opts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
		m.OTLP = true
	}
	m.provider = sdkmetric.NewMeterProvider(opts...)
	otel.SetMeterProvider(m.provider)
	return m, nil
}
