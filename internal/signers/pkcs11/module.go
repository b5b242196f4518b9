//go:build cgo

package pkcs11

import (
	"errors"
	"fmt"
	"os"
	"sync"

	p11 "github.com/miekg/pkcs11"
)

// module is one PKCS#11 library, loaded and initialised once for the
// process however many signers use it: C_Initialize and C_Finalize act on
// the whole process, so one signer's Close must not finalise the module
// under another's feet.
type module struct {
	path string
	ctx  *p11.Ctx
	refs int // guarded by modules.mu
}

var modules = struct {
	mu     sync.Mutex
	byPath map[string]*module
}{byPath: map[string]*module{}}

// acquireModule loads and initialises the module at path, or returns the
// one already loaded; release undoes it.
func acquireModule(path string) (*module, error) {
	modules.mu.Lock()
	defer modules.mu.Unlock()
	if m, ok := modules.byPath[path]; ok {
		m.refs++
		return m, nil
	}
	if _, err := os.Stat(path); err != nil {
		return nil, unavailable(fmt.Errorf("loading module %s: %w", path, err))
	}
	ctx := p11.New(path)
	if ctx == nil {
		// miekg/pkcs11 says no more than this: dlopen or
		// C_GetFunctionList failed.
		return nil, unavailable(fmt.Errorf("loading module %s: not a PKCS#11 library, or it cannot be loaded (dlopen or C_GetFunctionList failed)", path))
	}
	if err := initialize(ctx); err != nil {
		ctx.Destroy()
		return nil, classify(fmt.Sprintf("initialising module %s", path), err)
	}
	m := &module{path: path, ctx: ctx, refs: 1}
	modules.byPath[path] = m
	return m, nil
}

// initialize runs C_Initialize; a module that another part of the process
// (or another handle on the same library) initialised already is fine.
func initialize(ctx *p11.Ctx) error {
	err := ctx.Initialize()
	if errors.Is(err, p11.Error(p11.CKR_CRYPTOKI_ALREADY_INITIALIZED)) {
		return nil
	}
	return err
}

// reinitialize initialises the module again after someone finalised it
// behind the signers' back (CKR_CRYPTOKI_NOT_INITIALIZED).
func (m *module) reinitialize() error {
	modules.mu.Lock()
	defer modules.mu.Unlock()
	return initialize(m.ctx)
}

// release drops one use; the last finalises and unloads the module.
func (m *module) release() {
	modules.mu.Lock()
	defer modules.mu.Unlock()
	m.refs--
	if m.refs > 0 {
		return
	}
	delete(modules.byPath, m.path)
	_ = m.ctx.Finalize() // nothing to do about a module that will not finalise
	m.ctx.Destroy()
}
