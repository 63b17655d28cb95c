// Package builtin provides the tools cmd/toolexec ships, built with the
// typed constructor tool.New and safe by default:
//
//   - current_time: the current time in an IANA time zone (zone data is
//     embedded, so it works in minimal images).
//   - calculator: + - * / % ^ and parentheses evaluated by a small parser
//     (Eval); no names, no functions, nothing is executed; bounded length
//     and nesting; division by zero and non-finite results are errors.
//   - read_file and list_dir: only with Config.Root, confined to it.
//     Paths are relative; absolute paths and ".." are rejected and files
//     are opened through os.Root, so symlinks that lead outside the root
//     are rejected as well (ErrOutsideRoot). read_file returns UTF-8 text
//     up to MaxFileBytes (longer files are cut with a note) and refuses
//     binary files; list_dir returns at most MaxDirEntries entries.
//
// Tools(Config{}) returns current_time and calculator only.
package builtin
