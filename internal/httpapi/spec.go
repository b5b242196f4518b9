package httpapi

import (
	"fmt"
	"maps"
	"net/http"
	"regexp"
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
//
// It also returns the echo paths of those operations: handleError answers
// their errors in Sawtooth's shape too when echo raises them before the
// operation's middleware runs (the body limit).
var queryGuards = sync.OnceValues(func() (specRules, error) {
	doc, err := apigen.GetSpec()
	if err != nil {
		return specRules{}, fmt.Errorf("loading the embedded OpenAPI document: %w", err)
	}
	rules := specRules{guards: make(map[string][]echo.MiddlewareFunc), sawtoothPaths: make(map[string]bool),
		sawtoothOps: make(map[string]bool), secured: make(map[string]bool)}
	guards := rules.guards
	for path, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			if sawtoothOperation(op) {
				guards[op.OperationID] = []echo.MiddlewareFunc{sawtoothErrors}
				rules.sawtoothPaths[echoPath(path)] = true
				rules.sawtoothOps[op.OperationID] = true
				continue
			}
			declared := make(map[string]bool)
			for _, p := range slices.Concat(item.Parameters, op.Parameters) {
				if p.Value != nil && p.Value.In == openapi3.ParameterInQuery {
					declared[p.Value.Name] = true
				}
			}
			guards[op.OperationID] = []echo.MiddlewareFunc{checkQuery(declared)}
			if op.Security != nil && len(*op.Security) > 0 {
				rules.secured[op.OperationID] = true
			}
		}
	}
	return rules, nil
})

// specRules is what queryGuards derives from the document.
type specRules struct {
	// guards are the middlewares of each operation, by operationId.
	guards map[string][]echo.MiddlewareFunc
	// sawtoothOps are the x-sawtooth operations, by operationId.
	sawtoothOps map[string]bool
	// sawtoothPaths are the echo route paths of the x-sawtooth operations.
	sawtoothPaths map[string]bool
	// secured are the operations that declare a security requirement: an
	// API key (requireAPIKey runs before their other middleware).
	secured map[string]bool
}

// echoPath turns an OpenAPI path template (/v1/batches/{id}) into the route
// path echo reports in c.Path() (/v1/batches/:id).
func echoPath(template string) string {
	return pathParam.ReplaceAllString(template, ":$1")
}

var pathParam = regexp.MustCompile(`\{([^}]+)\}`)

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
