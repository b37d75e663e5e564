package dirlock

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// holdEnv makes the test binary a process that holds a directory's lock (TestMain) until its
// stdin closes or it is killed.
const holdEnv = "OUTLIERD_DIRLOCK_HOLD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(holdEnv); dir != "" {
		if _, err := Acquire(dir); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("held")
		bufio.NewReader(os.Stdin).ReadString('\n') // (until the parent closes it, or kills this)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// holder starts another process holding dir's lock and returns it once it holds it.
func holder(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "held" {
		t.Fatalf("the holding process said %q (%v), want held", line, err)
	}
	return cmd
}

// TestAnotherProcessIsRefused: a directory another process holds is refused at once, the
// message naming that process's pid; once that process is gone (killed: no release of its
// own, the kernel's), the directory is free. newuser31: two instances on one detect.state_dir
// wrote their files over each other.
func TestAnotherProcessIsRefused(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no flock(2)")
	}
	dir := t.TempDir()
	cmd := holder(t, dir)
	l, err := Acquire(dir)
	if err == nil {
		l.Release()
		t.Fatal("Acquire of a directory another process holds: no error")
	}
	for _, want := range []string{dir, "in use by another process", fmt.Sprintf("pid %d", cmd.Process.Pid), FileName} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	l, err = Acquire(dir)
	if err != nil {
		t.Fatalf("after the holder was killed: %v", err)
	}
	l.Release()
}

// TestHeldAgainWithinTheProcess: this process may take a directory it holds again (a restart
// of a pipeline in one process); the lock goes with the last release (another process then
// takes it), and a release twice counts once.
func TestHeldAgainWithinTheProcess(t *testing.T) {
	dir := t.TempDir()
	a, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Acquire(dir + "/.") // (the same directory, named otherwise)
	if err != nil {
		t.Fatalf("second hold within the process: %v", err)
	}
	a.Release()
	a.Release() // (counts once: b still holds it)
	if runtime.GOOS != "windows" {
		probe := exec.Command(os.Args[0], "-test.run=^$")
		probe.Env = append(os.Environ(), holdEnv+"="+dir)
		if out, err := probe.Output(); err == nil || !strings.Contains(string(out), "in use by another process") {
			t.Errorf("another process while b holds it: %q (%v), want refused", out, err)
		}
	}
	b.Release()
	holder(t, dir) // (free for another process now)
}
