package signers_test

import (
	"testing"

	"github.com/ledgerq/ledgerq/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }
