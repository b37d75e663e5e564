package main

import (
	"bufio"
	"fmt"
	"os"
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

// notTheInput refuses an output file (out, of option flag) that is the input file: it was
// overwritten without a word, after the work, and the data it was made from lost.
func notTheInput(input, out, flag string) error {
	if out == "" || input == "" {
		return nil
	}
	a, err := os.Stat(input)
	if err != nil {
		return nil // the input's own error comes where it is read
	}
	if b, err := os.Stat(out); err == nil && os.SameFile(a, b) {
		return usageError{fmt.Errorf("%s %s is the input file: it would be overwritten", flag, out)}
	}
	return nil
}
