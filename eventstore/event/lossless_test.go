package event

import (
	"errors"
	"math"
	"testing"
)

func TestCheckLossless(t *testing.T) {
	cases := []struct {
		name string
		v    Value
		path string // "" = lossless
	}{
		{"null", Null(), ""},
		{"parsed -0 is not", mustParse(`{"a":[1,-0]}`), `$["a"][1]`},
		{"plain", mustParse(`{"a":[1,"x",true,null,{"b":0}]}`), ""},
		{"overflow", mustParse(`[1e999]`), `$[0]`},
		{"NaN", Array(Number(math.NaN())), `$[0]`},
		{"-Inf root", Number(math.Inf(-1)), `$`},
	}
	for _, c := range cases {
		err := CheckLossless(c.v)
		if c.path == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		var le *LosslessError
		if !errors.As(err, &le) || le.Path != c.path || !errors.Is(err, ErrNotLossless) {
			t.Errorf("%s: err = %v, want path %s", c.name, err, c.path)
		}
	}
	ok := mustParse(`{"a":[1,2,{"b":3}]}`)
	if allocs := testing.AllocsPerRun(10, func() { _ = CheckLossless(ok) }); allocs != 0 {
		t.Errorf("CheckLossless of a valid value allocated %v times", allocs)
	}
}

func mustParse(s string) Value {
	v, err := Parse([]byte(s))
	if err != nil {
		panic(err)
	}
	return v
}
