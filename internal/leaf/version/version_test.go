package version

import "testing"

// Whatever is stamped, the version is SemVer: micro services refuse
// anything else and would not start.
func TestString(t *testing.T) {
	defer func(v string) { Version = v }(Version)
	for stamp, want := range map[string]string{
		"":              dev,
		"v1.2.3":        "1.2.3",
		"1.2.3-rc.1":    "1.2.3-rc.1",
		"dev":           "0.0.0-dev",
		"main@abc/1234": "0.0.0-main-abc-1234",
	} {
		Version = stamp
		if got := String(); got != want {
			t.Errorf("stamped %q: String() = %q, want %q", stamp, got, want)
		}
	}
}
