// Command repocheck is part of make lint. It checks the repository as others
// receive it, from the files git tracks, without the network:
//
//   - no tracked file is an executable binary (ELF, Mach-O, PE, or any file
//     with the executable bit that is not a script starting with "#!");
//   - every relative link in a tracked Markdown file resolves: the file exists
//     inside the repository and, for "file.md#anchor", the anchor is a heading
//     slug or an explicit <a id="..."> of that file;
//   - no tracked file outside .git links or refers to ../shared/, which other
//     readers of the repository do not have;
//   - the docs say one thing once where they drifted apart: README.md has
//     at most 250 lines, and one Markdown file only writes the helm install
//     command (the others link to it).
//
// Usage: go run ./scripts/lint/repocheck [DIR] (default: the current folder,
// which must be the top of a git work tree).
package main

import (
	"fmt"
	"os"
)

func main() {
	dir := "."
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	files, err := trackedFiles(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "repocheck: %v\n", err)
		os.Exit(1)
	}
	problems, err := check(dir, files)
	if err != nil {
		fmt.Fprintf(os.Stderr, "repocheck: %v\n", err)
		os.Exit(1)
	}
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "repocheck: %d problem(s) in %d tracked files\n", len(problems), len(files))
		os.Exit(1)
	}
	fmt.Printf("repocheck: %d tracked files: no binaries, every relative link resolves\n", len(files))
}
