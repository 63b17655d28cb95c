package cmdutil_test

import (
	"flag"
	"fmt"
	"os"

	"github.com/llmworker/llmworker/internal/cmdutil"
)

// A service registers the shared flags next to its own, parses, and builds
// its logger from --log-format/--log-level.
func Example() {
	getenv := func(k string) string {
		return map[string]string{"LLMW_PREFIX": "acme", "LLMW_LOG_FORMAT": "text"}[k]
	}
	var c cmdutil.Common
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	c.Register(fs, getenv, "replica-1")
	if err := cmdutil.Parse(fs, []string{"--log-level", "warn"}); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Prefix, c.Instance, c.Log.Format, c.Log.Level)
	log, err := c.Log.Logger(os.Stdout)
	if err != nil {
		fmt.Println(err)
		return
	}
	log.Info("not shown below warn")
	_, err = cmdutil.NewLogger(os.Stdout, "xml", "info")
	fmt.Println(err)
	// Output:
	// acme replica-1 text warn
	// --log-format: want json or text, got "xml"
}
