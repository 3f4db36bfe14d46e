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

// Let the console act, for those named in a credentials file: a line per
// user, name:secret. A browser signs in with basic auth; a program sends the
// secret as a bearer token.
func ExampleReadCredentials() {
	f, err := fleet.New(fleet.Config{Brokers: []string{"localhost:9092"}})
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	credentials, err := console.ReadCredentials("/etc/kdelay/console-credentials")
	if err != nil {
		log.Fatal(err)
	}
	c, err := console.New(console.Config{Fleet: f, Actions: true, Credentials: credentials})
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.ListenAndServe(":8080", c))
}
