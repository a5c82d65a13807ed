// Package cache implements a small, concurrency-safe LRU cache with
// optional time-based expiry. It is intentionally dependency free.
package cache

import (
	"container/list"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// ErrNotFound is returned when a key is missing or has expired.
var ErrNotFound = errors.New("cache: key not found")

const defaultCapacity = 128

// Entry is a single cached value together with its bookkeeping data.
type Entry struct {
	Key       string
	Value     interface{}
	ExpiresAt time.Time
	hits      int
}

// Expired reports whether the entry is past its deadline.
func (e *Entry) Expired(now time.Time) bool {
	return !e.ExpiresAt.IsZero() && now.After(e.ExpiresAt)
}

// Stats holds counters describing cache behaviour.
type Stats struct {
	Hits      uint64 `json:"hits"`
	Misses    uint64 `json:"misses"`
	Evictions uint64 `json:"evictions"`
}

// String formats the counters for logs.
func (s Stats) String() string {
	total := s.Hits + s.Misses
	ratio := 0.0
	if total > 0 {
		ratio = float64(s.Hits) / float64(total)
	}
	return fmt.Sprintf("hits=%d misses=%d evictions=%d ratio=%.2f", s.Hits, s.Misses, s.Evictions, ratio)
}

// Cache is an LRU cache. The zero value is not usable; call New.
type Cache struct {
	mu       sync.Mutex
	capacity int
	ttl      time.Duration
	ll       *list.List
	items    map[string]*list.Element
	stats    Stats
	onEvict  func(key string, value interface{})
	now      func() time.Time
}

// Option configures a Cache.
type Option func(*Cache)

// WithTTL sets a default time-to-live for new entries.
func WithTTL(d time.Duration) Option {
	return func(c *Cache) { c.ttl = d }
}

// WithEvictHook registers a callback invoked after an entry is evicted.
func WithEvictHook(fn func(string, interface{})) Option {
	return func(c *Cache) { c.onEvict = fn }
}

// New creates a cache holding at most capacity entries.
func New(capacity int, opts ...Option) *Cache {
	if capacity <= 0 {
		capacity = defaultCapacity
	}
	c := &Cache{
		capacity: capacity,
		ll:       list.New(),
		items:    make(map[string]*list.Element, capacity),
		now:      time.Now,
	}
	for _, opt := range opts {
		opt(c)
	}
	return c
}

// Get returns the value stored under key.
func (c *Cache) Get(key string) (interface{}, error) {
	c.mu.Lock()
	defer c.mu.Unlock()

	el, ok := c.items[key]
	if !ok {
		c.stats.Misses++
		return nil, ErrNotFound
	}
	ent := el.Value.(*Entry)
	if ent.Expired(c.now()) {
		c.removeElement(el)
		c.stats.Misses++
		return nil, fmt.Errorf("get %q: %w", key, ErrNotFound)
	}
	ent.hits++
	c.ll.MoveToFront(el)
	c.stats.Hits++
	return ent.Value, nil
}

// Set inserts or replaces the value for key.
func (c *Cache) Set(key string, value interface{}) {
	c.mu.Lock()
	defer c.mu.Unlock()

	var expires time.Time
	if c.ttl > 0 {
		expires = c.now().Add(c.ttl)
	}
	if el, ok := c.items[key]; ok {
		ent := el.Value.(*Entry)
		ent.Value, ent.ExpiresAt = value, expires
		c.ll.MoveToFront(el)
		return
	}
	el := c.ll.PushFront(&Entry{Key: key, Value: value, ExpiresAt: expires})
	c.items[key] = el
	for c.ll.Len() > c.capacity {
		c.removeElement(c.ll.Back())
		c.stats.Evictions++
	}
}

// Delete removes key if present and reports whether it was found.
func (c *Cache) Delete(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.removeElement(el)
		return true
	}
	return false
}

func (c *Cache) removeElement(el *list.Element) {
	ent := c.ll.Remove(el).(*Entry)
	delete(c.items, ent.Key)
	if c.onEvict != nil {
		c.onEvict(ent.Key, ent.Value)
	}
}

// Keys returns the keys from most to least recently used.
func (c *Cache) Keys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, c.ll.Len())
	for el := c.ll.Front(); el != nil; el = el.Next() {
		keys = append(keys, el.Value.(*Entry).Key)
	}
	return keys
}

// Dump renders the cache contents, one entry per line.
func (c *Cache) Dump() string {
	var b strings.Builder
	b.WriteString(`# cache dump` + "\n")
	for i, k := range c.Keys() {
		switch {
		case i == 0:
			fmt.Fprintf(&b, "* %s (hot)\n", k)
		case strings.HasPrefix(k, "tmp:"):
			continue
		default:
			fmt.Fprintf(&b, "  %s\n", k)
		}
	}
	return b.String()
}

// Snapshot returns a copy of the statistics.
func (c *Cache) Snapshot() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

/*
Purge walks the list and drops every expired entry. It is cheap enough
to call from a ticker goroutine every few seconds.
*/
func (c *Cache) Purge() (removed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for el := c.ll.Back(); el != nil; {
		prev := el.Prev()
		if el.Value.(*Entry).Expired(now) {
			c.removeElement(el)
			removed++
		}
		el = prev
	}
	return removed
}
