package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestMistakesSayCommandFileAndWhatToDo: run with no arguments, or with an input, model or
// config file that does not exist, every command says on one line which command, which file or
// flag, and what to do. gen without arguments said `--kind must be one of ..., got ""`; predict's
// missing model "solvingset: load: open M: ...", naming neither the command's flag nor the
// reason alone; replay "F: cannot open: open F: ..."; a missing config "config: open C: ...".
func TestMistakesSayCommandFileAndWhatToDo(t *testing.T) {
	dir := t.TempDir()
	csv, model, yaml := filepath.Join(dir, "missing.csv"), filepath.Join(dir, "missing.model"), filepath.Join(dir, "missing.yaml")
	data := gen(t, "--kind", "g2d", "--rows", "50")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"gen"}, []string{"--kind is required", "g2d", "outlierd help gen"}},
		{[]string{"gen", "--kind", "g2d"}, []string{"--rows is required", "outlierd help gen"}},
		{[]string{"topn"}, []string{"--input is required", "outlierd help topn"}},
		{[]string{"predict"}, []string{"--model and --input are required", "outlierd help predict"}},
		{[]string{"density"}, []string{"--input is required", "outlierd help density"}},
		{[]string{"hypercube"}, []string{"--input is required", "outlierd help hypercube"}},
		{[]string{"proclus"}, []string{"--input is required", "outlierd help proclus"}},
		{[]string{"replay"}, []string{"--input is required", "outlierd help replay"}},
		{[]string{"lint"}, []string{"--config is required", "outlierd help lint"}},
		{[]string{"run"}, []string{"--config is required", "outlierd help run"}},
		{[]string{"produce"}, []string{"--config and --input are required", "outlierd help produce"}},
		{[]string{"tail"}, []string{"--config is required", "outlierd help tail"}},
		{[]string{"topics", "create"}, []string{"--config is required", "outlierd help topics"}},
		{[]string{"topn", "--input", csv}, []string{csv + ": cannot open: no such file or directory"}},
		{[]string{"density", "--input", csv}, []string{csv + ": cannot open: no such file or directory"}},
		{[]string{"hypercube", "--input", csv}, []string{csv + ": cannot open: no such file or directory"}},
		{[]string{"proclus", "--input", csv}, []string{csv + ": cannot open: no such file or directory"}},
		{[]string{"replay", "--input", csv}, []string{csv + ": cannot open: no such file or directory"}},
		{[]string{"predict", "--model", model, "--input", data}, []string{"--model " + model + ": cannot open: no such file or directory"}},
		{[]string{"replay", "--input", data, "--config", yaml}, []string{yaml + ": cannot read the config: no such file or directory"}},
		{[]string{"lint", "--config", yaml}, []string{yaml + ": cannot read the config: no such file or directory"}},
		{[]string{"run", "--config", yaml}, []string{yaml + ": cannot read the config: no such file or directory"}},
		{[]string{"topics", "create", "--config", yaml}, []string{yaml + ": cannot read the config: no such file or directory"}},
		{[]string{"produce", "--config", yaml, "--input", data}, []string{yaml + ": cannot read the config: no such file or directory"}},
		{[]string{"tail", "--config", yaml}, []string{yaml + ": cannot read the config: no such file or directory"}},
	} {
		args := c.args
		if deviceCommands[args[0]] && args[0] != "run" { // (run's device is the config's)
			args = append(append([]string{}, args...), "--device", "cpu")
		}
		out, errs, code := outlierd(t, args...)
		line := lastLine(errs)
		if code == 0 || out != "" || !strings.HasPrefix(line, "outlierd "+c.args[0]+": ") {
			t.Errorf("%v: exit %d, stdout %q, stderr's last line %q: want the command's name", c.args, code, out, line)
		}
		for _, w := range c.want {
			if !strings.Contains(line, w) {
				t.Errorf("%v: %q lacks %q", c.args, line, w)
			}
		}
		if strings.Count(line, filepath.Base(csv))+strings.Count(line, filepath.Base(yaml))+strings.Count(line, filepath.Base(model)) > 1 {
			t.Errorf("%v: the file named twice: %q", c.args, line)
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}
