package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is set at build time: go build -ldflags "-X main.version=v1.2.3". Empty: the version
// Go recorded in the binary (versionInfo).
var version string

// versionOutput is the JSON contract of `outlierd version --json`.
type versionOutput struct {
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go_version"`
	Build     string `json:"build"` // cpu | cuda
	Platform  string `json:"platform"`
}

// versionInfo is what the binary knows of its build: -ldflags' version first, else the module
// version (a `go install ...@v1.2.3` build), else "devel"; the VCS revision and whether the tree
// had local changes, when Go stamped them (a build inside the repository).
func versionInfo() versionOutput {
	out := versionOutput{Version: version, GoVersion: runtime.Version(), Build: "cpu", Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if cudaBuild {
		out.Build = "cuda"
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if out.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			out.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				out.Revision = s.Value
			case "vcs.modified":
				out.Modified = s.Value == "true"
			}
		}
	}
	if out.Version == "" {
		out.Version = "devel"
	}
	return out
}

// runVersion prints the build: `outlierd version`, `outlierd --version`.
func runVersion(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", stdout, stderr)
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	v := versionInfo()
	if *asJSON {
		return json.NewEncoder(stdout).Encode(v)
	}
	line := "outlierd " + v.Version
	if v.Revision != "" {
		rev := v.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if v.Modified {
			rev += "+modified"
		}
		line += " (" + rev + ")"
	}
	_, err := fmt.Fprintf(stdout, "%s %s %s %s\n", line, v.GoVersion, v.Build, v.Platform)
	return err
}
