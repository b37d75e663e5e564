package main

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// writeRowCSV writes a per-row output file of the batch commands: the header, then one line
// "i,<value>" per input row in order, value appended by appendValue. flag names the option in
// errors.
func writeRowCSV(path, flag, header string, rows int, appendValue func(line []byte, i int) []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, header)
	var line []byte
	for i := range rows {
		line = strconv.AppendInt(line[:0], int64(i), 10)
		line = append(line, ',')
		line = append(appendValue(line, i), '\n')
		w.Write(line) // a write error sticks in w and comes back from Flush
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", flag, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	return nil
}

// checkOutput refuses, before any work, an output file (out, of option flag) that is the input
// file (it was overwritten without a word, after the work, and the data it was made from
// lost) or that cannot be written: a directory, or in a directory that is missing or not
// writable (found only when it was created, after the work: a long run's result lost). A file
// there already is left as it is until the command writes it.
func checkOutput(input, out, flag string) error {
	if out == "" {
		return nil
	}
	if input != "" {
		if a, err := os.Stat(input); err == nil { // (else the input's own error comes where it is read)
			if b, err := os.Stat(out); err == nil && os.SameFile(a, b) {
				return usageError{fmt.Errorf("%s %s is the input file: it would be overwritten", flag, out)}
			}
		}
	}
	// (Worded as the create after the work would have been, the file named, not the probe.)
	if st, err := os.Stat(out); err == nil && st.IsDir() {
		return fmt.Errorf("%s: open %s: is a directory", flag, out)
	}
	probe, err := os.CreateTemp(filepath.Dir(out), ".outlierd-probe-*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("%s: open %s: %w", flag, out, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return nil
}
