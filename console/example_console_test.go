package console_test

import (
	"log"
	"net/http"

	"github.com/kdelay/kdelay/console"
	"github.com/kdelay/kdelay/fleet"
)

// Mount the console in a server of your own, under a prefix: its pages link
// to each other relatively.
func Example() {
	f, err := fleet.New(fleet.Config{Brokers: []string{"localhost:9092"}})
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	c, err := console.New(console.Config{Fleet: f}) // read-only: Actions is false
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/kdelay/", http.StripPrefix("/kdelay", c))
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", mux))
}
