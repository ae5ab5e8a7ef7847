package sabotage

import (
	"context"
	"database/sql"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/claimapi"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/mysql"
	"github.com/txbox/txbox/store/postgres"
	"github.com/txbox/txbox/store/sqlite"
)

// TestWrappersKeepOptionalInterfaces checks, for every store of the module,
// that each sabotage wrapper has exactly the interfaces the store has, that
// the transaction claims it hands out have exactly those of the store's own
// claims, and that NoInbox's inbox SQL has exactly those of the store's.
// "The interfaces" are every interface type declared in packages store and
// claimapi (and outbox.Notifier), read from their source, so that one added
// there is checked without this test being told: a wrapper that dropped it would
// make the sabotaged relay choose another code path than the shipped one.
func TestWrappersKeepOptionalInterfaces(t *testing.T) {
	ifaces := declaredInterfaces(t, "../../store", "../claimapi", "../../outbox")
	for _, want := range []string{"claimapi.TxClaimer", "claimapi.ChainClaimer", "claimapi.Splitter", "store.BacklogSampler",
		"claimapi.IsolatingClaim", "claimapi.ChainedClaim", "store.InboxBatchInserter", "outbox.Notifier"} {
		if _, ok := ifaces[want]; !ok {
			t.Fatalf("%s not found in the sources (found %v)", want, slices.Sorted(maps.Keys(ifaces)))
		}
	}
	t.Run("postgres", func(t *testing.T) {
		s := storeenv.MigratedPostgres(t, postgres.Options{})
		// The store the relay ships with has them all: this test is about
		// them.
		for _, name := range []string{"claimapi.TxClaimer", "claimapi.ChainClaimer", "claimapi.Splitter", "store.BacklogSampler", "store.Counter", "store.InboxAdmin"} {
			if !hasAll(s, ifaces[name]) {
				t.Fatalf("the PostgreSQL store has no %s", name)
			}
		}
		for i := range 8 {
			storeenv.Write(t, storeenv.Postgres{}, s, txbox.MustEvent("Order", "o"+string(rune('a'+i)), "Created", map[string]any{"i": i}))
		}
		checkStore[pgx.Tx](t, ifaces, s)
	})
	t.Run("mysql", func(t *testing.T) {
		s := storeenv.Migrated(t, storeenv.OpenMySQL(t, mysql.Options{}))
		checkStore[*sql.Tx](t, ifaces, s)
	})
	t.Run("sqlite", func(t *testing.T) {
		s := storeenv.Migrated(t, storeenv.OpenSQLite(t, sqlite.Options{}))
		checkStore[*sql.Tx](t, ifaces, s)
	})
}

// checkStore compares s with each wrapper of it; where s holds claims by
// transaction, a claim of each kind of the store's with one of the
// wrapper's (the store must hold at least 6 unsent rows of distinct
// aggregates, one per claim).
func checkStore[T any](t *testing.T, ifaces map[string][]string, s store.Store) {
	t.Helper()
	ctx := context.Background()
	wrappers := []struct {
		name string
		wrap func(store.Store) store.Store
	}{
		{"MarkFirst", MarkFirst},
		{"Overtake", Overtake},
		{"NoInbox", func(s store.Store) store.Store { return NoInbox[T](s.(store.InboxStore[T])).(store.Store) }},
	}
	for _, wr := range wrappers {
		ws := wr.wrap(s)
		compare(t, ifaces, wr.name, s, ws)
		if got, want := signature(ws, storeInterfaces), signature(s, storeInterfaces); got != want {
			t.Errorf("%s: %T has %s, the store %s", wr.name, ws, got, want)
		}
		if _, ok := s.(claimapi.TxClaimer); ok {
			compareClaims(t, ifaces, wr.name, "ClaimTx", s, ws, func(s store.Store) (claimapi.Claim, error) {
				return s.(claimapi.TxClaimer).ClaimTx(ctx, 1)
			})
		}
		if _, ok := s.(claimapi.ChainClaimer); ok {
			compareClaims(t, ifaces, wr.name, "ClaimTxChained", s, ws, func(s store.Store) (claimapi.Claim, error) {
				return s.(claimapi.ChainClaimer).ClaimTxChained(ctx, 1)
			})
		}
	}
	st := s.(store.InboxStore[T])
	d, wd := st.InboxDialect(), NoInbox(st).InboxDialect()
	compare(t, ifaces, "NoInbox InboxDialect", d, wd)
	if got, want := signature(wd, dialectInterfaces), signature(d, dialectInterfaces); got != want {
		t.Errorf("NoInbox: the inbox dialect %T has %s, the store's %s", wd, got, want)
	}
}

// compareClaims claims one row through s and through its wrapper ws (named
// wrapper) with claim (the claim method named method), compares the two
// claims' interfaces, and aborts both.
func compareClaims(t *testing.T, ifaces map[string][]string, wrapper, method string, s, ws store.Store, claim func(store.Store) (claimapi.Claim, error)) {
	t.Helper()
	inner, err := claim(s)
	if err != nil || len(inner.Records()) != 1 {
		t.Fatalf("%s: %v", method, err)
	}
	outer, err := claim(ws)
	if err != nil || len(outer.Records()) != 1 {
		t.Fatalf("%s: %s: %v", wrapper, method, err)
	}
	compare(t, ifaces, wrapper+" "+method, inner, outer)
	inner.Abort()
	outer.Abort()
}

// compare fails the test for every declared interface that one of inner
// and outer has and the other has not.
func compare(t *testing.T, ifaces map[string][]string, what string, inner, outer any) {
	t.Helper()
	var have []string
	for _, name := range slices.Sorted(maps.Keys(ifaces)) {
		in, out := hasAll(inner, ifaces[name]), hasAll(outer, ifaces[name])
		if in != out {
			t.Errorf("%s: %T is %s: %v, but %T: %v", what, inner, name, in, outer, out)
		}
		if in {
			have = append(have, name)
		}
	}
	t.Logf("%s (%T): %s", what, outer, strings.Join(have, ", "))
}

func hasAll(v any, methods []string) bool {
	typ := reflect.TypeOf(v)
	for _, m := range methods {
		if _, ok := typ.MethodByName(m); !ok {
			return false
		}
	}
	return len(methods) > 0
}

// declaredInterfaces reads the interface types declared in the packages'
// non-test sources: "pkg.Name" to its methods, those of the interfaces it
// embeds included.
func declaredInterfaces(t *testing.T, dirs ...string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, dir := range dirs {
		decls := map[string]*ast.InterfaceType{}
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		pkg := ""
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, src, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			pkg = af.Name.Name
			ast.Inspect(af, func(n ast.Node) bool {
				if ts, ok := n.(*ast.TypeSpec); ok {
					if it, ok := ts.Type.(*ast.InterfaceType); ok {
						decls[ts.Name.Name] = it
					}
				}
				return true
			})
		}
		var methods func(name string) []string
		methods = func(name string) []string {
			it := decls[name]
			if it == nil {
				return nil
			}
			var ms []string
			for _, f := range it.Methods.List {
				for _, n := range f.Names {
					ms = append(ms, n.Name)
				}
				if len(f.Names) == 0 {
					x := f.Type
					if ix, ok := x.(*ast.IndexExpr); ok {
						x = ix.X
					}
					if id, ok := x.(*ast.Ident); ok {
						ms = append(ms, methods(id.Name)...)
					}
				}
			}
			return ms
		}
		for name := range decls {
			if ms := methods(name); len(ms) > 0 {
				out[pkg+"."+name] = ms
			}
		}
	}
	return out
}
