package load

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/bufbuild/protocompile"
)

// ProtoFiles compiles .proto files (and what they import, found in the
// import paths, then among the well-known types) for a gRPC server
// without the reflection service.
func ProtoFiles(ctx context.Context, files, importPaths []string) (Resolver, error) {
	if len(importPaths) == 0 {
		seen := map[string]bool{}
		for _, f := range files {
			if d := filepath.Dir(f); !seen[d] {
				seen[d] = true
				importPaths = append(importPaths, d)
			}
		}
	}
	rel := make([]string, len(files))
	for i, f := range files {
		rel[i] = f
		for _, d := range importPaths {
			if r, err := filepath.Rel(d, f); err == nil && filepath.IsLocal(r) {
				rel[i] = r
				break
			}
		}
	}
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: importPaths})}
	out, err := c.Compile(ctx, rel...)
	if err != nil {
		return nil, fmt.Errorf("load: -proto-file: %w", err)
	}
	return out.AsResolver(), nil
}
