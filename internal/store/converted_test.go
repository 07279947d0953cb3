package store

import (
	"fmt"
	"sync"
	"testing"
)

func TestConvertedRemembersSeveralVersions(t *testing.T) {
	it := &Item{converted: &convertedBox{}}
	it.SetConverted(&Converted{Key: "v1", Raw: []byte("one")})
	it.SetConverted(&Converted{Key: "v2", Raw: []byte("two")})
	if c := it.Converted("v1"); c == nil || string(c.Raw) != "one" {
		t.Fatalf("v1 forgotten after v2: %+v", c)
	}
	if c := it.Converted("v2"); c == nil || string(c.Raw) != "two" {
		t.Fatalf("v2: %+v", c)
	}
	it.SetConverted(&Converted{Key: "v1", Raw: []byte("uno")})
	if c := it.Converted("v1"); c == nil || string(c.Raw) != "uno" {
		t.Fatalf("v1 not replaced: %+v", c)
	}
	for i := 3; i <= maxConverted+1; i++ {
		it.SetConverted(&Converted{Key: fmt.Sprintf("v%d", i)})
	}
	if it.Converted("v2") != nil {
		t.Fatal("the oldest key is still remembered")
	}
	if it.Converted(fmt.Sprintf("v%d", maxConverted+1)) == nil || it.Converted("v1") == nil {
		t.Fatal("recent keys forgotten")
	}
	// Items outside a cache remember nothing.
	free := &Item{}
	free.SetConverted(&Converted{Key: "v1"})
	if free.Converted("v1") != nil {
		t.Fatal("an item outside a cache remembered")
	}
}

func TestConvertedConcurrent(t *testing.T) {
	it := &Item{converted: &convertedBox{}}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			key := fmt.Sprintf("v%d", g%3)
			for i := 0; i < 1000; i++ {
				it.SetConverted(&Converted{Key: key, Raw: []byte(key)})
				if c := it.Converted(key); c != nil && string(c.Raw) != key {
					t.Errorf("key %s holds %s", key, c.Raw)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	for g := 0; g < 3; g++ {
		if it.Converted(fmt.Sprintf("v%d", g)) == nil {
			t.Fatalf("v%d forgotten", g)
		}
	}
}
