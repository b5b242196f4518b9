package crashpoint

import "testing"

func TestHit_KillsOnlyOnTheNthPassOfTheArmedPoint(t *testing.T) {
	killed := 0
	old := kill
	kill = func() { killed++ }
	t.Cleanup(func() { kill = old; _ = Arm("") })

	if err := Arm("wallet.stored:2"); err != nil {
		t.Fatal(err)
	}
	Hit("wallet.broadcast")
	Hit("wallet.stored")
	if killed != 0 {
		t.Fatalf("killed after the first pass of a point armed for the second")
	}
	Hit("wallet.stored")
	if killed != 1 {
		t.Fatalf("killed %d times at the second pass, want 1", killed)
	}
	Hit("wallet.stored")
	if killed != 1 {
		t.Fatalf("killed again after the point fired: %d", killed)
	}
}

func TestHit_DisarmedNeverKills(t *testing.T) {
	killed := 0
	old := kill
	kill = func() { killed++ }
	t.Cleanup(func() { kill = old })
	_ = Arm("")
	Hit("wallet.stored")
	if killed != 0 {
		t.Fatal("a disarmed point killed")
	}
}

func TestArm_RefusesBadSpecs(t *testing.T) {
	t.Cleanup(func() { _ = Arm("") })
	for _, s := range []string{":2", "x:0", "x:-1", "x:y"} {
		if err := Arm(s); err == nil {
			t.Errorf("Arm(%q) accepted", s)
		}
	}
}
