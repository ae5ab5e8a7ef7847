package storetest

import (
	"reflect"
	"testing"
)

// testCase is one case of the suite, by the name it runs under.
type testCase struct {
	name string
	fn   func(*testing.T, Harness)
}

// runCases runs each case as a subtest on h.
func runCases(t *testing.T, h Harness, cases []testCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, h) })
	}
}

// runCasesIf runs cases when h's stores are a T, the optional interface
// they prove, and skips them, saying why, when not.
func runCasesIf[T any](t *testing.T, h Harness, skip string, cases []testCase) {
	if _, ok := h.Open(t).(T); !ok {
		t.Skip(skip)
	}
	runCases(t, h, cases)
}

// as returns v as a T, the interface a case needs, or fails t.
func as[T any](t *testing.T, v any) T {
	t.Helper()
	x, ok := v.(T)
	if !ok {
		t.Fatalf("%T does not implement %v", v, reflect.TypeFor[T]())
	}
	return x
}
