package httpapi

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/labstack/echo/v4"

	"github.com/ledgerq/ledgerq/internal/httpapi/apigen"
)

// GetOpenAPI answers GET /openapi.json with the OpenAPI document the server
// was generated from, as embedded in package apigen at generate time.
func (s *Server) GetOpenAPI(c echo.Context) error {
	doc, err := apigen.GetSpecJSON()
	if err != nil {
		return fmt.Errorf("decoding the embedded OpenAPI document: %w", err)
	}
	return c.JSONBlob(http.StatusOK, doc)
}

// queryGuards returns, for every operation of the embedded document by
// operationId, a middleware that runs before the generated parameter binding:
// it refuses query parameters the operation does not declare and declared ones
// given more than once, with the API's own messages (the binder would ignore
// the first and word the second its own way).
//
// Operations marked x-sawtooth (the Sawtooth drop-in) get sawtoothErrors
// instead: Sawtooth ignores query parameters it does not know, and every
// error of theirs, the binder's included, is a Sawtooth error object.
var queryGuards = sync.OnceValues(func() (map[string][]echo.MiddlewareFunc, error) {
	doc, err := apigen.GetSpec()
	if err != nil {
		return nil, fmt.Errorf("loading the embedded OpenAPI document: %w", err)
	}
	guards := make(map[string][]echo.MiddlewareFunc)
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			if sawtoothOperation(op) {
				guards[op.OperationID] = []echo.MiddlewareFunc{sawtoothErrors}
				continue
			}
			declared := make(map[string]bool)
			for _, p := range slices.Concat(item.Parameters, op.Parameters) {
				if p.Value != nil && p.Value.In == openapi3.ParameterInQuery {
					declared[p.Value.Name] = true
				}
			}
			guards[op.OperationID] = []echo.MiddlewareFunc{checkQuery(declared)}
		}
	}
	return guards, nil
})

func checkQuery(declared map[string]bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			query := c.QueryParams()
			// Sorted, so that a request with several bad parameters always
			// gets the same message.
			for _, name := range slices.Sorted(maps.Keys(query)) {
				switch {
				case !declared[name]:
					return errorf(http.StatusBadRequest, "unknown query parameter %s", name)
				case len(query[name]) > 1:
					return errorf(http.StatusBadRequest, "query parameter %s: given more than once", name)
				}
			}
			return next(c)
		}
	}
}

// sawtoothOperation reports whether op is marked x-sawtooth: true.
func sawtoothOperation(op *openapi3.Operation) bool {
	v, ok := op.Extensions["x-sawtooth"].(bool)
	return ok && v
}
