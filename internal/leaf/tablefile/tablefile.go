// Package tablefile is what pkg/models and pkg/price share for their
// table files: the strict reading of a file written in JSON or YAML, and a
// file whose table follows it (Reload when its modification time or size
// changed). Each package keeps its own format, rules and errors.
package tablefile

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"gopkg.in/yaml.v3"
)

// ErrMoreThanOneValue is a JSON file that holds a second value after the
// table.
var ErrMoreThanOneValue = errors.New("more than one JSON value")

// Decode reads data into v: YAML when yamlForm, else one JSON value. A
// field v does not have is an error in either form; an empty YAML
// document leaves v as it is.
func Decode(data []byte, yamlForm bool, v any) error {
	if yamlForm {
		d := yaml.NewDecoder(bytes.NewReader(data))
		d.KnownFields(true)
		if err := d.Decode(v); err != nil && err != io.EOF {
			return err
		}
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return ErrMoreThanOneValue
	}
	return nil
}

// File is a table file and the table last read from it by load.
type File[T any] struct {
	path string
	load func(path string) (*T, error)
	cur  atomic.Pointer[T]
	mu   sync.Mutex // serializes Reload
	mod  time.Time
	size int64
}

// New reads the file path with load.
func New[T any](path string, load func(path string) (*T, error)) (*File[T], error) {
	f := &File[T]{path: path, load: load}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	t, err := load(path)
	if err != nil {
		return nil, err
	}
	f.cur.Store(t)
	f.mod, f.size = fi.ModTime(), fi.Size()
	return f, nil
}

// Path is the file's path.
func (f *File[T]) Path() string { return f.path }

// Current is the table last read.
func (f *File[T]) Current() *T { return f.cur.Load() }

// Reload reads the file again when its modification time or size
// changed. A file that cannot be read or loaded leaves the table as it
// was and returns the error (the next Reload tries again); changed says
// that the table read from it is in force.
func (f *File[T]) Reload() (changed bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := os.Stat(f.path)
	if err != nil {
		return false, err
	}
	if fi.ModTime().Equal(f.mod) && fi.Size() == f.size {
		return false, nil
	}
	t, err := f.load(f.path)
	if err != nil {
		return false, err
	}
	f.cur.Store(t)
	f.mod, f.size = fi.ModTime(), fi.Size()
	return true, nil
}
