package config

import (
	"slices"
	"testing"
)

func TestClosest(t *testing.T) {
	t.Parallel()
	names := []string{"brokers", "listen", "tls", "at", "id", "check-interval", "retention-headroom"}
	tests := []struct {
		name, typed string
		want        []string
	}{
		{"swapped letters", "brokres", []string{"brokers"}},
		{"a letter missing", "chek-interval", []string{"check-interval"}},
		{"a prefix", "retention-head", []string{"retention-headroom"}},
		{"an abbreviation, not two edits away", "lis", []string{"listen"}},
		{"two names as close", "it", []string{"at", "id"}},
		{"nothing close", "partitions", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Closest(tt.typed, names); !slices.Equal(got, tt.want) {
				t.Errorf("Closest(%q) = %q, want %q", tt.typed, got, tt.want)
			}
		})
	}
}

func TestEditDistance(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		want int
	}{
		{"brokers", "brokers", 0},
		{"brokres", "brokers", 1}, // a swap
		{"broker", "brokers", 1},
		{"brokerz", "brokers", 1},
		{"", "key", 3},
		{"listen", "silent", 4},
	}
	for _, tt := range tests {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
