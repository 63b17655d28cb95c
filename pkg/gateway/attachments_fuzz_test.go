package gateway

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
)

// Any file part either becomes a valid image or file part — an image
// exactly for an image media type, holding the data URL's bytes — or is
// refused with an error naming the UI part's field.
func FuzzFileToPart(f *testing.F) {
	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
	f.Add("image/png", "data:image/png;base64,"+png, "a.png")
	f.Add("", "data:image/png;base64,"+png, "")
	f.Add("application/pdf", "data:application/pdf;base64,"+base64.StdEncoding.EncodeToString([]byte("%PDF-1.7\n")), "r.pdf")
	f.Add("text/plain; charset=utf-8", "data:text/plain;charset=utf-8;base64,aGVsbG8=", "n.txt")
	f.Add("image/png", "https://example.com/a.png", "")
	f.Add("image/png", "http://example.com/a.png", "")
	f.Add("image/png", "data:image/png,%89PNG", "")
	f.Add("image/svg+xml", "data:image/svg+xml;base64,PHN2Zz4=", "")
	f.Add("IMAGE/PNG", "DATA:image/png;BASE64,"+png, "")
	f.Fuzz(func(t *testing.T, mediaType, url, filename string) {
		p, err := fileToPart(UIPart{Type: "file", MediaType: mediaType, URL: url, Filename: filename})
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "url: ") && !strings.HasPrefix(msg, "mediaType: ") {
				t.Fatalf("error %q names no field", msg)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("accepted part %+v is not valid: %v", p, err)
		}
		if (p.Type == events.PartImage) != strings.HasPrefix(p.MediaType, "image/") {
			t.Fatalf("media type %s gave a %s part", p.MediaType, p.Type)
		}
		if p.Data != "" {
			_, body, _ := strings.Cut(url, ",")
			want, _ := base64.StdEncoding.DecodeString(body)
			if got, _ := p.Bytes(); !bytes.Equal(got, want) {
				t.Fatalf("part holds %d bytes, the data URL %d", len(got), len(want))
			}
		} else if p.URL != url {
			t.Fatalf("url %q became %q", url, p.URL)
		}
	})
}
