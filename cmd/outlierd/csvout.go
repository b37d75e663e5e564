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
