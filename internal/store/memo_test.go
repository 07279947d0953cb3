package store

import (
	"sync"
	"testing"
)

func TestMemoUpdateIsAtomic(t *testing.T) {
	var m Memo
	if m.Load() != nil {
		t.Fatal("a new memo holds something")
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				m.Update(func(old any) any {
					n, _ := old.(int)
					return n + 1
				})
			}
		}()
	}
	wg.Wait()
	if got := m.Load(); got != 8000 {
		t.Fatalf("memo holds %v after 8000 increments", got)
	}
}
