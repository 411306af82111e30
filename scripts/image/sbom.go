package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// spdx is an SPDX 2.3 document of the image: the janitor binary (its
// checksum) and every Go module linked into it, from the build information
// the Go toolchain writes into each binary (the image holds nothing else
// but the CA bundle and two text files).
func spdx(o *buildOptions, bin []byte) ([]byte, error) {
	bi, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		return nil, fmt.Errorf("read the binary's build information: %w", err)
	}
	sum := sha256.Sum256(bin)
	type pkg = map[string]any
	root := pkg{
		"SPDXID": "SPDXRef-Package-" + o.name, "name": o.name, "versionInfo": o.version,
		"downloadLocation": source, "filesAnalyzed": false, "licenseConcluded": "Apache-2.0",
		"checksums":    []pkg{{"algorithm": "SHA256", "checksumValue": hex.EncodeToString(sum[:])}},
		"externalRefs": []pkg{purl("github.com/pvc-janitor/pvc-janitor", o.version)},
	}
	pkgs := []pkg{root}
	rels := []pkg{{"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES", "relatedSpdxElement": root["SPDXID"]}}
	for i, m := range bi.Deps {
		if m.Replace != nil {
			m = m.Replace
		}
		id := fmt.Sprintf("SPDXRef-Package-go-%d", i)
		pkgs = append(pkgs, pkg{"SPDXID": id, "name": m.Path, "versionInfo": m.Version,
			"downloadLocation": "https://proxy.golang.org/" + m.Path + "/@v/" + m.Version + ".zip", "filesAnalyzed": false,
			"comment": "go.sum " + m.Sum, "externalRefs": []pkg{purl(m.Path, m.Version)}})
		rels = append(rels, pkg{"spdxElementId": root["SPDXID"], "relationshipType": "DEPENDS_ON", "relatedSpdxElement": id})
	}
	doc := pkg{
		"spdxVersion": "SPDX-2.3", "dataLicense": "CC0-1.0", "SPDXID": "SPDXRef-DOCUMENT",
		"name":              "pvc-janitor-image-" + o.version,
		"documentNamespace": source + "/spdx/" + o.version + "-" + o.arch + "-" + hex.EncodeToString(sum[:8]),
		"creationInfo": pkg{"created": o.created.Format(time.RFC3339),
			"creators": []string{"Tool: pvc-janitor scripts/image", "Tool: " + bi.GoVersion}},
		"packages": pkgs, "relationships": rels,
	}
	return json.MarshalIndent(doc, "", "  ")
}

func purl(path, version string) map[string]any {
	return map[string]any{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
		"referenceLocator": "pkg:golang/" + path + "@" + version}
}
