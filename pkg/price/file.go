package price

import "github.com/llmworker/llmworker/internal/leaf/tablefile"

// File is a price table file and the table last read from it: a Source
// whose table follows the file (Reload).
type File struct{ f *tablefile.File[Table] }

// NewFile reads the price table file path (Load).
func NewFile(path string) (*File, error) {
	f, err := tablefile.New(path, Load)
	if err != nil {
		return nil, err
	}
	return &File{f}, nil
}

// Path is the file's path.
func (f *File) Path() string { return f.f.Path() }

// Table is the table last read.
func (f *File) Table() *Table { return f.f.Current() }

// Reload reads the file again when its modification time or size
// changed. A file that cannot be read or parsed leaves the table as it
// was and returns the error (the next Reload tries again); changed says
// that the table read from it is in force.
func (f *File) Reload() (changed bool, err error) { return f.f.Reload() }
