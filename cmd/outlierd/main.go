// Command outlierd is the streaming outlier detector and its batch tools.
//
//	outlierd gen      write a synthetic data set (g2d, g3d, one, three, sensors) as CSV
//	outlierd topn     exact top-n distance-based outliers of a CSV file (SolvingSet or BruteForce)
//	outlierd predict  score a CSV file against a saved solving-set model
//	outlierd density  outliers in uncertain data by micro-clusters and density sampling
//	outlierd hypercube  hypercube (grid) neighbourhood density scores (GDBOD)
//	outlierd lint     validate a pipeline config; outlierd run: the streaming pipeline
//	outlierd topics   create the topics a pipeline config names; produce: send a file to its
//	                  input topic; tail: print its outliers
//	outlierd demo     the main job on an embedded default
//	outlierd devices  the GPU this binary (or its CUDA companion, outlierd-cuda) opens, or why none
//	outlierd version  the build: version, Go version, cpu or cuda
//
// Every command prints one clear line and exits non-zero on bad input; with --json the
// result on stdout is exactly one JSON object. Help asked for (outlierd help [CMD], CMD -h,
// CMD --help) goes to stdout, status 0; the help printed after a command-line mistake goes to
// stderr, status 2.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/rs/zerolog"
	"golang.org/x/term"

	"github.com/outlierd/outlierd/internal/accel"
)

// command is one subcommand: its one-line summary and its entry point.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

// commands is the command table; the device commands get opt (what main learnt about the
// devices: why the CUDA companion did not take over).
func commands(opt accel.Options) map[string]command {
	on := func(f func([]string, io.Writer, io.Writer, accel.Options) error) func([]string, io.Writer, io.Writer) error {
		return func(args []string, stdout, stderr io.Writer) error { return f(args, stdout, stderr, opt) }
	}
	return map[string]command{
		"gen":     {"write a synthetic data set as CSV to stdout", runGen},
		"topn":    {"exact top-n distance-based outliers of a CSV file", on(runTopN)},
		"predict": {"score a CSV file against a saved solving-set model", on(runPredict)},
		"density": {"outliers in uncertain data: micro-clusters and density sampling", on(runDensity)},
		"proclus": {"projected clustering (PROCLUS): k clusters, each in its own subspace, and outliers", on(runProclus)},
		"lint":    {"validate a pipeline config without running it", runLint},
		"run":     {"run the streaming pipeline (Kafka in, outliers out)", on(runRun)},
		"replay":  {"feed a file (CSV, JSON lines, logfmt) through the detect stage as the pipeline does, without Kafka", on(runReplay)},
		"demo":    {"the main job on an embedded default: in-process Kafka, sensor stream, live summary", on(runDemo)},
		"devices": {"where the GPU commands run: the GPU this binary opens, or why none", on(runDevices)},
		"topics":  {"create the input, output, dead-letter and model topics of a pipeline config", runTopics},
		"produce": {"send a file's records (CSV, JSON lines, logfmt) to a pipeline config's input topic", runProduce},
		"tail":    {"print the outliers of a pipeline config's output topic, de-duplicated by id", runTail},
		"version": {"print the version, the Go version and the build (cpu or cuda)", runVersion},

		"hypercube": {"hypercube (grid) neighbourhood density scores of a CSV file (GDBOD)", on(runHypercube)},
	}
}

// usageError marks errors caused by the command line itself (exit status 2).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// reportedError is a failure the command has already written to stderr in its own format
// (lint's file:line:column lines): exit status 1, nothing more printed.
type reportedError struct{ err error }

func (r reportedError) Error() string { return r.err.Error() }
func (r reportedError) Unwrap() error { return r.err }

func main() {
	os.Exit(mainWith(os.Args[1:]))
}

// mainWith is main's work: run's signals caught first (runSignals), then the CUDA
// companion's hand-over (the CPU build execs it when it starts here, companion.go, else learns
// why not), then the command.
func mainWith(args []string) int {
	if len(args) > 0 && args[0] == "run" {
		runSignals = catchRunSignals(os.Stderr)
	}
	why := handOff(args, runSignals.stopped())
	return runWith(args, os.Stdout, os.Stderr, accel.Options{NoCompanion: why})
}

// run runs one command line (no companion was tried).
func run(args []string, stdout, stderr io.Writer) int {
	return runWith(args, stdout, stderr, accel.Options{})
}

// runWith runs one command line with what main learnt about the devices.
func runWith(args []string, stdout, stderr io.Writer, opt accel.Options) int {
	cmds := commands(opt)
	out := &stickyWriter{w: stdout}
	if len(args) >= 2 && args[0] == "help" {
		// help CMD is CMD -h: the command's own help, not the list; help help is the list.
		if args[1] == "help" {
			args = args[:1]
		} else if _, ok := cmds[args[1]]; !ok {
			unknownCommand(stderr, args[1], cmds)
			return 2
		} else {
			args = []string{args[1], "-h"}
		}
	}
	if len(args) == 0 { // a mistake: the list on stderr
		usage(stderr, cmds)
		return 2
	}
	if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		usage(out, cmds) // asked for: stdout, for a pager or grep
		if out.err != nil {
			fmt.Fprintf(stderr, "outlierd: writing the help: %v\n", out.err)
			return 1
		}
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" {
		args = []string{"version"}
	}
	c, ok := cmds[args[0]]
	if !ok {
		unknownCommand(stderr, args[0], cmds)
		return 2
	}
	err := c.run(args[1:], out, stderr)
	if (err == nil || errors.Is(err, flag.ErrHelp)) && out.err != nil {
		err = fmt.Errorf("writing the output: %w", out.err) // (a report written with Fprintf and its error dropped)
	}
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var re reportedError
	if errors.As(err, &re) {
		return 1
	}
	var ue usageError
	if !errors.As(err, &ue) {
		fmt.Fprintf(stderr, "outlierd %s: %v\n", args[0], err)
		return 1
	}
	// A mistake on the command line says where to read how it goes, unless the flag package
	// printed the help above it, or the message names the command line to write already.
	hint := ""
	if !errors.As(err, new(parseError)) && !strings.Contains(err.Error(), "outlierd ") {
		hint = fmt.Sprintf(" (outlierd help %s: its usage and flags)", args[0])
	}
	fmt.Fprintf(stderr, "outlierd %s: %v%s\n", args[0], err, hint)
	return 2
}

// stickyWriter is a command's stdout that remembers its first failed write: a report that could
// not be written (a full disk, /dev/full) fails the command, exit status 1, where the command
// wrote it with fmt.Fprintf and went on (its status was 0). Every later write fails the same.
type stickyWriter struct {
	w   io.Writer
	err error
}

func (s *stickyWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.w.Write(p)
	if err != nil {
		s.err = err
	}
	return n, err
}

// unknownCommand names the commands there are, so a typo needs no second run to correct.
func unknownCommand(w io.Writer, name string, cmds map[string]command) {
	fmt.Fprintf(w, "outlierd: unknown command %q; the commands: %s (outlierd help: what each does)\n", name, strings.Join(commandNames(cmds), ", "))
}

func commandNames(cmds map[string]command) []string {
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "outlierd: streaming outlier detection (distance-based solving sets, density sampling in uncertain data)")
	fmt.Fprintln(w, "\nUsage: outlierd <command> [flags]   (outlierd help <command>, or outlierd <command> -h, for its flags)")
	fmt.Fprintln(w, "\nCommands:")
	names := commandNames(cmds)
	width := 0
	for _, n := range names {
		width = max(width, len(n))
	}
	for _, n := range names {
		fmt.Fprintf(w, "  %-*s  %s\n", width, n, cmds[n].summary)
	}
}

// newFlagSet makes a subcommand's flag set that reports errors instead of exiting. Its help, in
// the one layout every command shares (help.go), goes to stdout when asked for (-h, -help,
// --help; outlierd help CMD), status 0, so that it pipes into grep or a pager; after a mistake
// (an unknown flag, a bad value) the flag package's message and the help go to stderr, status 2,
// leaving stdout to results. The flag package calls Usage in both cases and writes the message
// to the set's output first in the second only: that write tells them apart.
func newFlagSet(name string, stdout, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("outlierd "+name, flag.ContinueOnError)
	errOut := &wroteWriter{w: stderr}
	fs.SetOutput(errOut)
	fs.Usage = func() {
		w := stdout
		if errOut.wrote {
			w = stderr
		}
		fs.SetOutput(w)
		defer fs.SetOutput(errOut)
		printHelp(fs, name)
	}
	return fs
}

// wroteWriter remembers whether anything was written through it.
type wroteWriter struct {
	w     io.Writer
	wrote bool
}

func (w *wroteWriter) Write(p []byte) (int, error) {
	w.wrote = true
	return w.w.Write(p)
}

// stopAfterParse makes every command return errParsedOnly once its flags parsed: the README
// test checks that each documented command line is accepted without running it.
var (
	stopAfterParse bool
	errParsedOnly  = errors.New("flags parsed (stopAfterParse)")
)

// parseError is a flag set's parse error: the flag package printed it and the help on stderr.
type parseError struct{ err error }

func (p parseError) Error() string { return p.err.Error() }
func (p parseError) Unwrap() error { return p.err }

// parse is fs.Parse, its errors marked: flag.ErrHelp (help printed on stdout) as it is, the
// rest a usageError of a parseError.
func parse(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return usageError{parseError{err}}
}

// parseFlags parses args and refuses stray positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	if stopAfterParse {
		return errParsedOnly
	}
	return nil
}

// flagsSet returns the names of the flags given on the command line.
// followDown lowers a size the command line left out (set: flagsSet) to most, what the input
// allows, where its default is larger (made for larger files), and says so on stderr; a value
// given is kept, for the command's own check to refuse. why says what bounds it.
func followDown(stderr io.Writer, cmd string, set map[string]bool, name string, v *int, most int, why string) {
	if set[name] || *v <= most || most < 1 {
		return
	}
	fmt.Fprintf(stderr, "%s: --%s %d (the default) is lowered to %d: %s\n", cmd, name, *v, most, why)
	*v = most
}

func flagsSet(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// isTerminal reports whether w is a terminal (progress bars and colour only then).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// newLogger logs to stderr: readable console lines on a terminal, JSON lines otherwise.
func newLogger(stderr io.Writer) zerolog.Logger {
	if isTerminal(stderr) {
		return zerolog.New(zerolog.ConsoleWriter{Out: stderr, TimeFormat: "15:04:05"}).With().Timestamp().Logger()
	}
	return zerolog.New(stderr).With().Timestamp().Logger()
}

// plural is n with its noun, singular for 1: plural(1, "row", "rows") is "1 row" (the file
// has 1 rows, said followDown's line of a one-row file).
func plural[N ~int | ~int64 | ~uint64](n N, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// oneOf validates an enumerated flag value.
func oneOf(flagName, v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return usageError{fmt.Errorf("--%s must be one of %s, got %q", flagName, strings.Join(allowed, "|"), v)}
}
