// Package version is the one version of llmworker: `llmworker version`
// prints it and every micro service ($SRV.INFO) reports it. Builds stamp it
// with -ldflags "-X github.com/llmworker/llmworker/internal/leaf/version.Version=v1.2.3";
// a `go install …@v1.2.3` build reports its module version.
package version

import (
	"regexp"
	"runtime/debug"
	"strings"
)

// Version is stamped at build time; "" reads the module version.
var Version = ""

// dev is reported by a build from a source tree that nothing stamped.
const dev = "0.1.0-dev"

// String returns the version: the stamped one, else the main module's
// version from the build info, else 0.1.0-dev. It is SemVer without a
// leading "v", as micro service versions must be.
func String() string {
	v := Version
	if v == "" {
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
	}
	if v == "" {
		return dev
	}
	v = strings.TrimPrefix(v, "v")
	if !semver.MatchString(v) {
		// micro services refuse a version that is not SemVer: keep what
		// was stamped as a pre-release of 0.0.0.
		v = "0.0.0-" + strings.Trim(nonIdent.ReplaceAllString(v, "-"), "-")
	}
	return v
}

var (
	semver   = regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	nonIdent = regexp.MustCompile(`[^0-9A-Za-z.-]+`)
)
