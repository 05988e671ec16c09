package bufpool

import "testing"

// TestClassSize: a class holds its lengths, at most 1/8 above them, and
// is its own class.
func TestClassSize(t *testing.T) {
	for n := MinBytes; n < 1<<24; n += n/13 + 1 {
		c := classSize(n)
		if c < n || c > n+n/8 || classSize(c) != c {
			t.Fatalf("classSize(%d) = %d", n, c)
		}
	}
}

// TestReuse: a buffer given back is handed out again for a length of its
// class or one up to a quarter below its capacity, not for a longer one
// nor a much shorter one; below MinBytes nothing is kept.
func TestReuse(t *testing.T) {
	p := New(1 << 20)
	a := p.Get(100_000)
	if len(a) != 100_000 || cap(a) != classSize(100_000) {
		t.Fatalf("len %d cap %d", len(a), cap(a))
	}
	a[0] = 7
	p.Put(a)
	if p.Held() != int64(cap(a)) {
		t.Fatalf("held %d, want %d", p.Held(), cap(a))
	}
	if b := p.Get(cap(a) + 1); &b[0] == &a[0] {
		t.Fatal("a longer length got the shorter buffer")
	}
	if b := p.Get(cap(a) / 2); &b[0] == &a[0] {
		t.Fatal("half the length got the buffer")
	}
	b := p.Get(cap(a) * 5 / 6)
	if &b[0] != &a[0] || len(b) != cap(a)*5/6 || p.Held() != 0 {
		t.Fatalf("a length 1/6 below the buffer's capacity did not get it (held %d)", p.Held())
	}
	small := p.Get(MinBytes - 1)
	p.Put(small)
	if p.Held() != 0 {
		t.Fatalf("a buffer below MinBytes kept: held %d", p.Held())
	}
	p.Put(make([]byte, 0, 100_001)) // not a class's capacity
	if p.Held() != 0 {
		t.Fatalf("a buffer not from Get kept: held %d", p.Held())
	}
}

// TestBound: the pool keeps at most its bytes; what does not fit is
// dropped, and a pool of 0 keeps nothing.
func TestBound(t *testing.T) {
	p := New(1 << 20)
	var bufs [][]byte
	for range 40 {
		bufs = append(bufs, p.Get(64<<10))
	}
	for _, b := range bufs {
		p.Put(b)
	}
	if p.Held() > 1<<20 || p.Held() < 1<<20-64<<10 {
		t.Fatalf("held %d of 1 MiB", p.Held())
	}
	z := New(0)
	z.Put(z.Get(64 << 10))
	if z.Held() != 0 {
		t.Fatalf("a pool of 0 holds %d", z.Held())
	}
}

// TestClassIndex: each class has its own index, in the order of the
// classes' sizes, one after the other, within the pool's array.
func TestClassIndex(t *testing.T) {
	prev, prevIndex := 0, -1
	for n := MinBytes; n < 1<<40; n = classSize(n) + 1 {
		c := classSize(n)
		i := classIndex(c)
		if c <= prev || i != prevIndex+1 && prev != 0 || i < 0 || i >= len(Pool{}.classes) {
			t.Fatalf("class %d (after %d): index %d after %d", c, prev, i, prevIndex)
		}
		prev, prevIndex = c, i
	}
}
