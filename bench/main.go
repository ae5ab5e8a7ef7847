// Command bench measures txbox against the raw limits of the same machine.
// It is a module of its own so that comparison code never enters the
// library's dependencies.
//
//	go run . history --db mysql://root@127.0.0.1:3306/test --history 2000000
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "history":
		err = history(os.Args[2:])
	case "drain":
		err = drainCmd(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage:
  bench drain   [--db URL] [--broker URL] [--events N] [--aggregates N] [--runs N] [--batch N] [--only a,b]
  bench history --db URL [--history N] [--backlog N] [--batch N] [--runs N]`)
	os.Exit(2)
}
