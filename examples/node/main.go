// Command node runs JavaScript in a NodeLTS session pool (the JavaScript
// code interpreter) with the azsessions client:
//
//  1. Learn's tutorial cell, console.log("hello-world");
//  2. state across executions: a function defined in one execution and
//     called in the next, whose value comes back as the result;
//  3. files: upload a CSV of temperature readings, summarise it with
//     Node.js (fs, top-level await of fs/promises), write the summary as
//     JSON in /mnt/data and download it;
//  4. an error is data: a JavaScript exception comes back as a failed
//     execution with the stack in stderr.
//
// Backend: a real NodeLTS session pool when AZURE_POOL_MANAGEMENT_ENDPOINT
// is set (authenticated with azidentity.NewDefaultAzureCredential),
// otherwise the emulator started in-process with -pool-type NodeLTS: Node.js
// in a bubblewrap sandbox.
//
//	go run ./examples/node [-data FILE] [-out FILE]
//
// It exits 0 only when every step did what it should.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.Data, "data", "testdata/TemperatureData.csv", "CSV file with a Temperature column to upload")
	flag.StringVar(&cfg.Out, "out", "summary.json", "where to save the summary the JavaScript code writes")
	flag.Parse()
	cfg.Endpoint = os.Getenv("AZURE_POOL_MANAGEMENT_ENDPOINT")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()

	if _, err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		os.Exit(1)
	}
}
