// godial shows how a Go program words a failed dial or listen, the way most
// Go programs report one: the error's text on a line of its own (or after
// log.Fatal's timestamp). TestWordingsRealPrograms builds and runs it.
//
//	godial dial NETWORK ADDR        fmt.Println(err) of net.Dial
//	godial fatal-dial NETWORK ADDR  log.Fatal(err) of net.Dial
//	godial listen NETWORK ADDR      fmt.Println(err) of net.Listen
//	godial get URL                  fmt.Println(err) of http.Get
//	godial http-listen ADDR         fmt.Println(err) of http.ListenAndServe
package main

import (
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: godial dial|fatal-dial|listen NETWORK ADDR | get URL | http-listen ADDR")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "dial":
		_, err = net.Dial(os.Args[2], os.Args[3])
	case "fatal-dial":
		if _, err := net.Dial(os.Args[2], os.Args[3]); err != nil {
			log.Fatal(err)
		}
	case "listen":
		_, err = net.Listen(os.Args[2], os.Args[3])
	case "get":
		_, err = http.Get(os.Args[2])
	case "http-listen":
		err = http.ListenAndServe(os.Args[2], nil)
	default:
		fmt.Fprintf(os.Stderr, "godial: unknown mode %q\n", os.Args[1])
		os.Exit(2)
	}
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
}
