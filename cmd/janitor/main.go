// Command janitor finds, rescues and reaps orphaned workspace
// PersistentVolumeClaims. See the README.
package main

import "github.com/pvc-janitor/pvc-janitor/internal/cli"

func main() { cli.Main() }
