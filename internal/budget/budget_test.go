package budget

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// counted is a value whose builds are counted.
func counted(p *Pool, cost int64, builds *atomic.Int64) *Value[int64] {
	return NewValue(p, func() (int64, int64, error) {
		n := builds.Add(1)
		return n, cost, nil
	})
}

func TestBuiltOnceUntilReleased(t *testing.T) {
	var builds atomic.Int64
	p := New(0)
	v := counted(p, 10, &builds)
	if v.Built() {
		t.Fatal("built before the first Get")
	}
	for range 3 {
		if got, err := v.Get(); err != nil || got != 1 {
			t.Fatalf("Get = %d, %v; want the first build", got, err)
		}
	}
	if s := p.Stats(); s.Used != 10 || s.Values != 1 || s.Builds != 1 {
		t.Fatalf("stats %+v", s)
	}
	v.Drop()
	if v.Built() || p.Stats().Used != 0 {
		t.Fatalf("after Drop: built %v, stats %+v", v.Built(), p.Stats())
	}
	if got, _ := v.Get(); got != 2 {
		t.Fatalf("Get after Drop = %d, want a second build", got)
	}
}

func TestLeastRecentlyUsedReleased(t *testing.T) {
	var builds [4]atomic.Int64
	p := New(30)
	vs := make([]*Value[int64], 4)
	for i := range vs {
		vs[i] = counted(p, 10, &builds[i])
	}
	for _, v := range vs[:3] {
		_, _ = v.Get()
	}
	// 0 is used again, so 1 is now the least recently used.
	_, _ = vs[0].Get()
	_, _ = vs[3].Get()
	want := []bool{true, false, true, true}
	for i, v := range vs {
		if v.Built() != want[i] {
			t.Errorf("value %d built = %v, want %v", i, v.Built(), want[i])
		}
	}
	s := p.Stats()
	if s.Used != 30 || s.Values != 3 || s.Releases != 1 || s.Builds != 4 {
		t.Fatalf("stats %+v", s)
	}
	if got, _ := vs[1].Get(); got != 2 {
		t.Fatalf("a released value is built again: got build %d", got)
	}
	if p.Stats().Used > 30 {
		t.Fatalf("over the limit: %+v", p.Stats())
	}
}

func TestOversizedValueKept(t *testing.T) {
	var a, b atomic.Int64
	p := New(10)
	small := counted(p, 5, &a)
	big := counted(p, 100, &b)
	_, _ = small.Get()
	if got, _ := big.Get(); got != 1 || !big.Built() {
		t.Fatal("the value just built is kept for its caller even over the limit")
	}
	if small.Built() {
		t.Fatal("older values make room for it")
	}
}

func TestErrorKeptLikeAValue(t *testing.T) {
	calls := 0
	v := NewValue[string](New(0), func() (string, int64, error) {
		calls++
		return "", 1, errors.New("does not compile")
	})
	for range 2 {
		if _, err := v.Get(); err == nil || err.Error() != "does not compile" {
			t.Fatalf("err = %v", err)
		}
	}
	if calls != 1 {
		t.Fatalf("built %d times, want once", calls)
	}
}

func TestNoPool(t *testing.T) {
	var builds atomic.Int64
	v := counted(nil, 1<<40, &builds)
	_, _ = v.Get()
	_, _ = v.Get()
	if builds.Load() != 1 {
		t.Fatal("a value outside a pool is built once")
	}
	v.Drop()
	_, _ = v.Get()
	if builds.Load() != 2 {
		t.Fatal("and again after Drop")
	}
}

// TestConcurrent: many goroutines over more values than the pool holds
// see each value whole, and the pool ends within its limit (run with
// -race).
func TestConcurrent(t *testing.T) {
	p := New(100)
	vs := make([]*Value[[]int], 20)
	for i := range vs {
		vs[i] = NewValue(p, func() ([]int, int64, error) {
			s := make([]int, 10)
			for j := range s {
				s[j] = i
			}
			return s, 10, nil
		})
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 2000 {
				i := (g*7 + k*3) % len(vs)
				s, err := vs[i].Get()
				if err != nil || len(s) != 10 || s[9] != i {
					t.Errorf("value %d: %v %v", i, s, err)
					return
				}
				if k%97 == 0 {
					vs[i].Drop()
				}
			}
		}()
	}
	wg.Wait()
	s := p.Stats()
	if s.Used > 100 || s.Used != int64(s.Values)*10 {
		t.Fatalf("stats %+v", s)
	}
	held := 0
	for _, v := range vs {
		if v.Built() {
			held++
		}
	}
	if held != s.Values {
		t.Fatalf("%d values built, the pool holds %d", held, s.Values)
	}
}

func ExampleValue() {
	pool := New(100)
	compile := func(name string) *Value[string] {
		return NewValue(pool, func() (string, int64, error) {
			fmt.Println("compiling", name)
			return "compiled " + name, 60, nil
		})
	}
	a, b := compile("a"), compile("b")
	s, _ := a.Get()
	fmt.Println(s)
	_, _ = a.Get() // held: not compiled again
	_, _ = b.Get() // a and b cost 120 > 100: a, the least recently used, is released
	s, _ = a.Get() // built again
	fmt.Println(s)
	// Output:
	// compiling a
	// compiled a
	// compiling b
	// compiling a
	// compiled a
}
