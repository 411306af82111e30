package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// repo makes a git work tree in a temporary folder with the given files
// (a name ending in "*" is tracked as executable) and returns its path.
func repo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	for name, body := range files {
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, "*") {
			name, mode = strings.TrimSuffix(name, "*"), 0o755
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		git("add", name)
	}
	return dir
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  []string // substrings, one per expected problem
	}{
		{
			name: "clean tree",
			files: map[string]string{
				"README.md":    "# Top\nSee [the spec](docs/spec.md#rule-rescued), [usage](docs/usage.md), [docs](docs) and [here](#top).\n",
				"docs/spec.md": "# Spec\n\n<a id=\"rule-rescued\"></a>\n**Rescued**\n",
				"docs/usage.md": "## Rescue (`snapshot`)\n[back](../README.md#top) [self](#rescue-snapshot)\n" +
					"```\n[not a link](missing.md)\n```\n`[code](missing.md)` [web](https://example.invalid/x)\n",
				"scripts/run.sh*": "#!/usr/bin/env bash\necho hi\n",
			},
		},
		{
			name:  "ELF binary",
			files: map[string]string{"localcluster*": "\x7fELF\x02\x01\x01\x00rest"},
			want:  []string{"localcluster: tracked executable binary (ELF)"},
		},
		{
			name:  "ELF without the executable bit",
			files: map[string]string{"tool": "\x7fELFxx"},
			want:  []string{"tool: tracked executable binary (ELF)"},
		},
		{
			name:  "PE binary",
			files: map[string]string{"janitor.exe": "MZ\x90\x00"},
			want:  []string{"janitor.exe: tracked executable binary (PE)"},
		},
		{
			name:  "executable bit on a file that is not a script",
			files: map[string]string{"versions.sh*": "V=1\n"},
			want:  []string{"versions.sh: tracked executable binary (executable bit without a #! line)"},
		},
		{
			name:  "missing file",
			files: map[string]string{"README.md": "x\n[usage](docs/usage.md)\n"},
			want:  []string{`README.md:2: link "docs/usage.md": no such tracked file or folder`},
		},
		{
			name: "missing anchor",
			files: map[string]string{
				"README.md":    "[rule](docs/spec.md#rule-gone)\n",
				"docs/spec.md": "# Spec\n## Rule rescued\n",
			},
			want: []string{`no heading or <a id> "rule-gone" in docs/spec.md`},
		},
		{
			name: "duplicate headings are numbered",
			files: map[string]string{
				"a.md": "## Flags\n## Flags\n[second](#flags-1) [third](#flags-2)\n",
			},
			want: []string{`"#flags-2": no heading`},
		},
		{
			name:  "README too long",
			files: map[string]string{"README.md": strings.Repeat("line\n", 251)},
			want:  []string{"README.md: 251 lines, at most 250"},
		},
		{
			name: "helm install written twice",
			files: map[string]string{
				"README.md":    "```\nhelm install x charts/x\n```\n",
				"docs/ops.md":  "```\nhelm install x charts/x\n```\n",
				"docs/more.md": "see the README\n",
			},
			want: []string{"README.md, docs/ops.md: the helm install command is written in 2 files"},
		},
		{
			name:  "leaves the repository",
			files: map[string]string{"README.md": "[spec](../shared/SPEC.md)\n"},
			want:  []string{`link "../shared/SPEC.md": leaves the repository`, "README.md:1: refers outside the repository"},
		},
		{
			name:  "a comment citing the outside spec",
			files: map[string]string{"internal/x/x.go": "package x\n\n// See ../shared/SPEC.md section 3.\n"},
			want:  []string{"internal/x/x.go:3: refers outside the repository"},
		},
		{
			name:  "reference-style link",
			files: map[string]string{"a.md": "[x][1]\n\n[1]: b.md\n"},
			want:  []string{`a.md:3: link "b.md": no such tracked file`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := repo(t, tc.files)
			files, err := trackedFiles(dir)
			if err != nil {
				t.Fatal(err)
			}
			got, err := check(dir, files)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d problems, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for _, w := range tc.want {
				found := false
				for _, g := range got {
					found = found || strings.Contains(g, w)
				}
				if !found {
					t.Errorf("no problem contains %q; got:\n%s", w, strings.Join(got, "\n"))
				}
			}
		})
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Rescue (`snapshot`)":                "rescue-snapshot",
		"Decisions where the spec is silent": "decisions-where-the-spec-is-silent",
		"Runs, locks, signals":               "runs-locks-signals",
		"3. Classification":                  "3-classification",
		"Sizes and money":                    "sizes-and-money",
		"<a id=\"x\"></a>Marks":              "marks",
		"snake_case and kebab-case":          "snake_case-and-kebab-case",
	} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}
