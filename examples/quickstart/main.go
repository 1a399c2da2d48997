// Command quickstart runs the three tasks of the LlamaIndex + Azure Code
// Interpreter walkthrough with the azsessions client, without an LLM:
//
//  1. the current time in Seattle;
//  2. upload a day of temperature readings, list the session's files and find
//     the highest temperature;
//  3. sort the file in place in descending order (first with the walkthrough's
//     syntax error, which comes back as data, then corrected) and download it;
//  4. when matplotlib is in the pool, plot the temperature curve and save the
//     image result.
//
// Backend: a real session pool when AZURE_POOL_MANAGEMENT_ENDPOINT is set
// (authenticated with azidentity.NewDefaultAzureCredential), otherwise the
// emulator started in-process with real Python in a bubblewrap sandbox.
//
//	go run ./examples/quickstart [-data FILE] [-out FILE] [-plot FILE]
//
// It exits 0 only when every task succeeded.
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
	flag.StringVar(&cfg.Data, "data", "testdata/TemperatureData.csv", "CSV file to upload, with Time (dates) and Temperature columns")
	flag.StringVar(&cfg.Out, "out", "SortedTemperatureData.csv", "where to save the sorted file")
	flag.StringVar(&cfg.Plot, "plot", "TemperatureCurve.png", "where to save the temperature curve (task 4)")
	flag.Parse()
	cfg.Endpoint = os.Getenv("AZURE_POOL_MANAGEMENT_ENDPOINT")
	if _, err := os.Stat(cfg.Data); err != nil {
		// before any session starts: task 2 would fail after task 1 ran
		fmt.Fprintf(os.Stderr, "quickstart: -data %s: %v (run from the repository's root, or give -data)\n", cfg.Data, err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()

	if _, err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart: "+oneLine(err))
		os.Exit(1)
	}
}

// oneLine keeps the first line of an error: the exit message is one line.
func oneLine(err error) string {
	msg := err.Error()
	for i, r := range msg {
		if r == '\n' {
			return msg[:i]
		}
	}
	return msg
}
