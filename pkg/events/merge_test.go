package events_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
)

// fill sets every exported field of v, a struct or what it points to,
// to a value that is not its zero value and that differs with n.
func fill(v reflect.Value, n int) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), n)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), n)
			}
		}
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", n))
	case reflect.Bool:
		v.SetBool(n%2 == 1)
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(n))
	case reflect.Uint8:
		v.SetUint(uint64('0' + n))
	case reflect.Float64:
		v.SetFloat(float64(n) / 10)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), n)
	case reflect.Map:
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, n)
		fill(e, n)
		v.Set(reflect.MakeMap(v.Type()))
		v.SetMapIndex(k, e)
	default:
		panic("fill: no value for " + v.Type().String())
	}
}

func filled[T any](n int) T {
	var v T
	fill(reflect.ValueOf(&v).Elem(), n)
	return v
}

// Every option a request or an agent sets wins over the one it is merged
// onto, and an option it leaves unset keeps the one below; provider
// options merge key by key (docs/protocol.md §5, "Agents"). Every field
// is set, so that a field Merge leaves out fails here.
func TestModelOptionsMergeEveryField(t *testing.T) {
	base, over := filled[events.ModelOptions](1), filled[events.ModelOptions](2)
	want := over
	want.ProviderOptions = map[string]json.RawMessage{"s1": base.ProviderOptions["s1"], "s2": over.ProviderOptions["s2"]}
	if got := base.Merge(&over); !reflect.DeepEqual(got, want) {
		t.Errorf("merge of a full set onto another:\n got  %+v\n want %+v", got, want)
	}
	if got := base.Merge(&events.ModelOptions{}); !reflect.DeepEqual(got, base) {
		t.Errorf("merge of nothing:\n got  %+v\n want %+v", got, base)
	}
	if got := base.Merge(nil); !reflect.DeepEqual(got, base) {
		t.Errorf("merge of nil:\n got  %+v\n want %+v", got, base)
	}
}

// A compaction setting of a session or request wins over the agent's or
// the service's, field by field, and the result shares no flag with it.
func TestCompactionConfigMergeEveryField(t *testing.T) {
	base, over := filled[events.CompactionConfig](1), filled[events.CompactionConfig](2)
	got := base.Merge(&over)
	if !reflect.DeepEqual(got, over) {
		t.Errorf("merge of a full set onto another:\n got  %+v\n want %+v", got, over)
	}
	if got.Disabled == over.Disabled || got.NoSummary == over.NoSummary || got.Native == over.Native {
		t.Error("the merged config shares a flag's pointer with the config merged in")
	}
	if got := base.Merge(&events.CompactionConfig{}); !reflect.DeepEqual(got, base) {
		t.Errorf("merge of nothing:\n got  %+v\n want %+v", got, base)
	}
}
