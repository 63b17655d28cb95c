package media_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/media"
	"github.com/llmworker/llmworker/pkg/natstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, natstest.NotOurGoroutines()...) }

func open(t *testing.T) (*media.Store, *natstest.Server) {
	t.Helper()
	s := natstest.Start(t, natstest.Options{Provision: true})
	st, err := media.Open(natstest.Context(t), s.JS)
	if err != nil {
		t.Fatal(err)
	}
	return st, s
}

// FIPS 180-4's test vector: SHA-256("abc").
const abcRef = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

func TestPutGetByContent(t *testing.T) {
	st, s := open(t)
	ctx := natstest.Context(t)
	ref, err := st.Put(ctx, []byte("abc"), "text/plain")
	if err != nil || ref != abcRef {
		t.Fatalf("Put = %q, %v; want %s", ref, err, abcRef)
	}
	got, err := st.Get(ctx, abcRef)
	if err != nil || string(got) != "abc" {
		t.Fatalf("Get = %q, %v", got, err)
	}
	// The same bytes again are not stored again.
	stream, err := s.JS.Stream(ctx, "OBJ_"+events.BucketMedia)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := stream.Info(ctx)
	before := info.State.Msgs
	if ref2, err := st.Put(ctx, []byte("abc"), "text/plain"); err != nil || ref2 != abcRef {
		t.Fatalf("second Put = %q, %v", ref2, err)
	}
	info, _ = stream.Info(ctx)
	if info.State.Msgs != before {
		t.Fatalf("a second Put of the same bytes stored %d more messages", info.State.Msgs-before)
	}

	if _, err := st.Get(ctx, "sha256:"+string(bytes.Repeat([]byte("0"), 64))); !errors.Is(err, media.ErrNotFound) {
		t.Fatalf("Get of an unknown ref: %v, want ErrNotFound", err)
	}
	for _, bad := range []string{"", "abc", "sha256:ABC", "md5:" + abcRef[7:], abcRef + "0"} {
		if _, err := st.Get(ctx, bad); !errors.Is(err, media.ErrInvalidRef) {
			t.Fatalf("Get(%q): %v, want ErrInvalidRef", bad, err)
		}
	}
	if _, err := st.Put(ctx, make([]byte, media.MaxSize+1), "application/pdf"); !errors.Is(err, media.ErrTooLarge) {
		t.Fatalf("Put above MaxSize: %v", err)
	}
}

func png(n int) []byte { return append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{1}, n)...) }

func TestOffloadAndResolve(t *testing.T) {
	st, _ := open(t)
	ctx := natstest.Context(t)
	big, small := png(events.InlineMediaLimit+1), png(10)
	msgs := []events.Message{
		{Role: events.RoleUser, Content: []events.Part{events.TextPart("look"), events.ImagePart("image/png", big), events.ImagePart("image/png", small)}},
		{Role: events.RoleTool, Content: []events.Part{events.ToolResultParts("c1", []events.Part{events.TextPart("shot"), events.ImagePart("image/png", big)}, false)}},
	}
	if !media.NeedsOffload(msgs, 0) {
		t.Fatal("NeedsOffload is false for a part above the limit")
	}
	n, err := st.Offload(ctx, msgs, 0)
	if err != nil || n != 2 {
		t.Fatalf("Offload = %d, %v; want the two large images", n, err)
	}
	if media.NeedsOffload(msgs, 0) {
		t.Fatal("NeedsOffload after Offload")
	}
	want := media.Ref(big)
	if p := msgs[0].Content[1]; p.Ref != want || p.Data != "" || p.Size != int64(len(big)) {
		t.Fatalf("offloaded part %+v", p)
	}
	if p := msgs[0].Content[2]; p.Ref != "" || p.Data == "" {
		t.Fatalf("a small part was offloaded: %+v", p)
	}
	if p := msgs[1].Content[0].Parts[1]; p.Ref != want {
		t.Fatalf("the tool result's image was not offloaded: %+v", p)
	}
	before, _ := json.Marshal(msgs)

	out, err := media.Resolve(ctx, st, msgs)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []events.Part{out[0].Content[1], out[1].Content[0].Parts[1]} {
		if b, _ := p.Bytes(); !bytes.Equal(b, big) || p.Ref != "" {
			t.Fatalf("resolved part holds %d bytes, ref %q", len(b), p.Ref)
		}
	}
	if after, _ := json.Marshal(msgs); !bytes.Equal(before, after) {
		t.Fatal("Resolve modified its input")
	}

	missing := "sha256:" + string(bytes.Repeat([]byte("e"), 64))
	msgs[1].Content[0].Parts[1].Ref = missing
	_, err = media.Resolve(ctx, st, msgs)
	var re *media.RefError
	if !errors.As(err, &re) || !errors.Is(err, media.ErrNotFound) || re.Field != "messages[1].content[0].content[1].ref" {
		t.Fatalf("Resolve of an unknown ref: %v", err)
	}
}

// A ref is held to its part's media_type as inline data is: a PNG
// uploaded and sent as a PDF, or bytes that are not UTF-8 sent as text,
// fail naming the part's ref, and the part is not resolved.
func TestResolveChecksTheMediaTypeOfARef(t *testing.T) {
	st, _ := open(t)
	ctx := natstest.Context(t)
	img := png(100)
	pngRef, err := st.Put(ctx, img, "image/png")
	if err != nil {
		t.Fatal(err)
	}
	binRef, err := st.Put(ctx, []byte{0x00, 0x81, 0xfe, 0xff}, "application/octet-stream")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, mediaType, ref, holds string
	}{
		{"a PNG sent as a PDF", "application/pdf", pngRef, "image/png"},
		{"a PNG sent as a JPEG", "image/jpeg", pngRef, "image/png"},
		{"binary sent as text", "text/plain", binRef, "binary data of an unknown kind"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msgs := []events.Message{{Role: events.RoleUser, Content: []events.Part{
				events.TextPart("what is this?"),
				{Type: partType(c.mediaType), MediaType: c.mediaType, Ref: c.ref},
			}}}
			out, err := media.Resolve(ctx, st, msgs)
			var re *media.RefError
			if !errors.As(err, &re) || !errors.Is(err, media.ErrMediaType) || re.Field != "messages[0].content[1].ref" || re.Ref != c.ref {
				t.Fatalf("Resolve = %v, %v; want ErrMediaType naming messages[0].content[1].ref", out, err)
			}
			if want := "holds " + c.holds + ", not " + c.mediaType; !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not say %q", err, want)
			}
		})
	}
	t.Run("a PNG sent as a PNG", func(t *testing.T) {
		msgs := []events.Message{{Role: events.RoleUser, Content: []events.Part{
			{Type: events.PartImage, MediaType: "image/png", Ref: pngRef, Size: int64(len(img))},
		}}}
		out, err := media.Resolve(ctx, st, msgs)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := out[0].Content[0].Bytes(); !bytes.Equal(b, img) {
			t.Fatalf("resolved to %d bytes, want the PNG's %d", len(b), len(img))
		}
	})
}

func partType(mediaType string) events.PartType {
	if strings.HasPrefix(mediaType, "image/") {
		return events.PartImage
	}
	return events.PartFile
}

// mapGetter serves refs from a map, for the fuzz target.
type mapGetter map[string][]byte

func (g mapGetter) Get(_ context.Context, ref string) ([]byte, error) {
	if b, ok := g[ref]; ok {
		return b, nil
	}
	return nil, media.ErrNotFound
}

// count counts the parts of msgs (tool results' included) that match.
func count(msgs []events.Message, match func(events.Part) bool) int {
	n := 0
	for _, m := range msgs {
		for _, p := range m.Content {
			for _, q := range append([]events.Part{p}, p.Parts...) {
				if match(q) {
					n++
				}
			}
		}
	}
	return n
}

// FuzzResolve: any decodable transcript either resolves to one without
// refs whose parts hold the stored bytes, or fails naming a ref it could
// not read; the input is never modified.
func FuzzResolve(f *testing.F) {
	f.Add(`[{"role":"user","content":[{"type":"image","media_type":"image/png","ref":"` + abcRef + `","size":3}]}]`)
	f.Add(`[{"role":"tool","content":[{"type":"tool_result","tool_use_id":"c","content":[{"type":"file","media_type":"text/plain","ref":"` + abcRef + `"}]}]}]`)
	f.Add(`[{"role":"user","content":[{"type":"file","media_type":"application/pdf","ref":"sha256:00"}]}]`)
	f.Add(`[{"role":"user","content":"hi"}]`)
	g := mapGetter{abcRef: []byte("abc")}
	f.Fuzz(func(t *testing.T, s string) {
		var msgs []events.Message
		if json.Unmarshal([]byte(s), &msgs) != nil {
			return
		}
		before, err := json.Marshal(msgs)
		if err != nil {
			return
		}
		out, err := media.Resolve(context.Background(), g, msgs)
		if after, _ := json.Marshal(msgs); !bytes.Equal(before, after) {
			t.Fatal("Resolve modified its input")
		}
		if err != nil {
			var re *media.RefError
			if !errors.As(err, &re) || re.Field == "" {
				t.Fatalf("error without the part's field: %v", err)
			}
			return
		}
		if media.HasRefs(out) {
			t.Fatal("a ref survived Resolve")
		}
		if refs, filled := count(msgs, func(p events.Part) bool { return p.Ref != "" }),
			count(out, func(p events.Part) bool { return p.Data == "YWJj" }); filled < refs {
			t.Fatalf("%d refs in, %d parts with the stored bytes out", refs, filled)
		}
	})
}
