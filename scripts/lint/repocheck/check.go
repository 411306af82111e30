package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

// file is one tracked file: its slash-separated path from the top and
// whether git records it as executable.
type file struct {
	Path       string
	Executable bool
}

// trackedFiles lists the files git tracks under dir, with their modes.
func trackedFiles(dir string) ([]file, error) {
	out, err := exec.Command("git", "-C", dir, "ls-files", "-s", "-z").Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files in %q: %w", dir, err)
	}
	var files []file
	for _, rec := range bytes.Split(out, []byte{0}) {
		if len(rec) == 0 {
			continue
		}
		// "<mode> <object> <stage>\t<path>"
		meta, p, ok := bytes.Cut(rec, []byte{'\t'})
		if !ok {
			return nil, fmt.Errorf("git ls-files: unexpected record %q", rec)
		}
		mode, _, _ := bytes.Cut(meta, []byte{' '})
		if string(mode) == "160000" { // a submodule, not a file
			continue
		}
		files = append(files, file{Path: string(p), Executable: string(mode) == "100755"})
	}
	return files, nil
}

// check returns one line per problem found in files under dir.
func check(dir string, files []file) ([]string, error) {
	var problems []string
	for _, step := range []func(string, []file) ([]string, error){binaries, brokenLinks, outsideReferences, saidOnce} {
		p, err := step(dir, files)
		if err != nil {
			return nil, err
		}
		problems = append(problems, p...)
	}
	sort.Strings(problems)
	return problems, nil
}

// binaries finds tracked executable binaries.
func binaries(dir string, files []file) ([]string, error) {
	var problems []string
	for _, f := range files {
		head, err := readHead(filepath.Join(dir, filepath.FromSlash(f.Path)), 8192)
		if err != nil {
			if os.IsNotExist(err) { // deleted in the work tree, not yet in the index
				continue
			}
			return nil, err
		}
		if why := binaryReason(head, f.Executable); why != "" {
			problems = append(problems, fmt.Sprintf("%s: tracked executable binary (%s): remove it and ignore it in .gitignore", f.Path, why))
		}
	}
	return problems, nil
}

// brokenLinks finds the markdown files' relative links and anchors that
// do not resolve.
func brokenLinks(dir string, files []file) ([]string, error) {
	var problems []string
	anchors := map[string]map[string]bool{} // markdown path -> its anchors
	exists := map[string]bool{}
	dirs := map[string]bool{}
	for _, f := range files {
		exists[f.Path] = true
		for d := path.Dir(f.Path); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for _, f := range files {
		if !strings.HasSuffix(f.Path, ".md") {
			continue
		}
		body, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f.Path)))
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return nil, err
		}
		for _, l := range links(string(body)) {
			if p := checkLink(dir, f.Path, l, exists, dirs, anchors); p != "" {
				problems = append(problems, p)
			}
		}
	}
	return problems, nil
}

// outsideReferences finds text that refers outside the repository.
func outsideReferences(dir string, files []file) ([]string, error) {
	var problems []string
	for _, f := range files {
		if strings.HasPrefix(f.Path, "scripts/lint/repocheck/") {
			continue // they name the pattern they look for
		}
		body, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f.Path)))
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return nil, err
		}
		if bytes.IndexByte(body, 0) >= 0 {
			continue // binary data (an image, say): not text to read
		}
		for i, line := range strings.Split(string(body), "\n") {
			if strings.Contains(line, "../shared/") || strings.Contains(line, "shared/SPEC.md") {
				problems = append(problems, fmt.Sprintf("%s:%d: refers outside the repository (../shared/): cite docs/spec.md instead", f.Path, i+1))
			}
		}
	}
	return problems, nil
}

func readHead(name string, n int) ([]byte, error) {
	fh, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	buf := make([]byte, n)
	m, err := io.ReadFull(fh, buf)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return buf[:m], nil
}

// binaryReason says why a file's first bytes make it an executable binary,
// or "" when they do not.
func binaryReason(head []byte, executable bool) string {
	magics := []struct {
		magic []byte
		name  string
	}{
		{[]byte("\x7fELF"), "ELF"},
		{[]byte{0xcf, 0xfa, 0xed, 0xfe}, "Mach-O"},
		{[]byte{0xce, 0xfa, 0xed, 0xfe}, "Mach-O"},
		{[]byte{0xca, 0xfe, 0xba, 0xbe}, "Mach-O universal"},
		{[]byte("MZ"), "PE"},
		{[]byte("!<arch>\n"), "ar archive"},
	}
	for _, m := range magics {
		if bytes.HasPrefix(head, m.magic) {
			return m.name
		}
	}
	if executable && !bytes.HasPrefix(head, []byte("#!")) {
		return "executable bit without a #! line"
	}
	return ""
}

// link is one relative or absolute link target found in a Markdown file.
type link struct {
	Line   int
	Target string
}

var (
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refLink    = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$`)
	hrefLink   = regexp.MustCompile(`<a\s[^>]*href="([^"]+)"`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
	explicitID = regexp.MustCompile(`<a\s[^>]*(?:id|name)="([^"]+)"`)
	heading    = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
)

// links returns the link targets of a Markdown text, outside code.
func links(md string) []link {
	var out []link
	inFence := false
	sc := bufio.NewScanner(strings.NewReader(md))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		line = codeSpan.ReplaceAllString(line, "")
		for _, re := range []*regexp.Regexp{inlineLink, refLink, hrefLink} {
			for _, m := range re.FindAllStringSubmatch(line, -1) {
				out = append(out, link{Line: n, Target: m[1]})
			}
		}
	}
	return out
}

var scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)

// checkLink returns a problem line for a link that does not resolve, or "".
func checkLink(dir, from string, l link, exists, dirs map[string]bool, anchors map[string]map[string]bool) string {
	if scheme.MatchString(l.Target) {
		return "" // a URL: the network is not checked
	}
	target, anchor, _ := strings.Cut(l.Target, "#")
	where := fmt.Sprintf("%s:%d: link %q", from, l.Line, l.Target)
	resolved := from
	if target != "" {
		if strings.HasPrefix(target, "/") {
			return where + ": absolute path; use a path relative to the file"
		}
		resolved = path.Clean(path.Join(path.Dir(from), target))
		if resolved == ".." || strings.HasPrefix(resolved, "../") {
			return where + ": leaves the repository"
		}
		if !exists[resolved] && !dirs[resolved] && resolved != "." {
			return where + ": no such tracked file or folder"
		}
	}
	if anchor == "" || !strings.HasSuffix(resolved, ".md") {
		return ""
	}
	ids, ok := anchors[resolved]
	if !ok {
		body, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(resolved)))
		if err != nil {
			return where + ": " + err.Error()
		}
		ids = anchorsOf(string(body))
		anchors[resolved] = ids
	}
	if !ids[anchor] {
		return where + fmt.Sprintf(": no heading or <a id> %q in %s", anchor, resolved)
	}
	return ""
}

// anchorsOf returns the anchors of a Markdown text: GitHub's slugs of its
// headings (duplicates numbered -1, -2, ...) and explicit <a id="...">.
func anchorsOf(md string) map[string]bool {
	ids := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(md, "\n") {
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range explicitID.FindAllStringSubmatch(line, -1) {
			ids[m[1]] = true
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			s := slug(m[2])
			if n := seen[s]; n > 0 {
				ids[fmt.Sprintf("%s-%d", s, n)] = true
			} else {
				ids[s] = true
			}
			seen[s]++
		}
	}
	return ids
}

var htmlTag = regexp.MustCompile(`<[^>]+>`)

// slug is GitHub's anchor for a heading: lower case, markup and punctuation
// dropped except '-' and '_', spaces to '-'.
func slug(h string) string {
	h = htmlTag.ReplaceAllString(h, "")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// readmeMaxLines bounds the README: the start of the documentation, not
// all of it (issue 39).
const readmeMaxLines = 250

// saidOnce checks that the docs say one thing once where they drifted
// apart before (issue 39 item 14): the README stays within readmeMaxLines,
// and the Helm install command is written in one Markdown file only (the
// others link to it).
func saidOnce(dir string, files []file) ([]string, error) {
	var problems, installs []string
	for _, f := range files {
		if !strings.HasSuffix(f.Path, ".md") {
			continue
		}
		body, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f.Path)))
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return nil, err
		}
		if f.Path == "README.md" {
			if n := strings.Count(string(body), "\n"); n > readmeMaxLines {
				problems = append(problems, fmt.Sprintf("README.md: %d lines, at most %d: move detail into docs/", n, readmeMaxLines))
			}
		}
		if strings.Contains(string(body), "helm install ") {
			installs = append(installs, f.Path)
		}
	}
	if len(installs) > 1 {
		problems = append(problems, fmt.Sprintf("%s: the helm install command is written in %d files; write it once and link to it", strings.Join(installs, ", "), len(installs)))
	}
	return problems, nil
}
