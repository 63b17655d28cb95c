package price

import (
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// File is a price table file and the table last read from it: a Source
// whose table follows the file (Reload).
type File struct {
	path string
	cur  atomic.Pointer[Table]
	mu   sync.Mutex // serializes Reload
	mod  time.Time
	size int64
}

// NewFile reads the price table file path (Load).
func NewFile(path string) (*File, error) {
	f := &File{path: path}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	t, err := Load(path)
	if err != nil {
		return nil, err
	}
	f.cur.Store(t)
	f.mod, f.size = fi.ModTime(), fi.Size()
	return f, nil
}

// Path is the file's path.
func (f *File) Path() string { return f.path }

// Table is the table last read.
func (f *File) Table() *Table { return f.cur.Load() }

// Reload reads the file again when its modification time or size
// changed. A file that cannot be read or parsed leaves the table as it
// was and returns the error (the next Reload tries again); changed says
// that the table read from it is in force.
func (f *File) Reload() (changed bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := os.Stat(f.path)
	if err != nil {
		return false, err
	}
	if fi.ModTime().Equal(f.mod) && fi.Size() == f.size {
		return false, nil
	}
	t, err := Load(f.path)
	if err != nil {
		return false, err
	}
	f.cur.Store(t)
	f.mod, f.size = fi.ModTime(), fi.Size()
	return true, nil
}
