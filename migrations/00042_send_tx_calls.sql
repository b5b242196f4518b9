-- +goose Up
-- Wallet lane: the contract-call form of ledgerq.send_tx (issue 42). A call
-- named by a function signature ("transfer(address,uint256)") or by a
-- method of an ABI, with its arguments as a JSON array, is encoded here, in
-- the caller's transaction, as POST /v1/wallets/{wallet}/send-tx encodes it
-- (internal/calldata): the same types read the same way, the same bounds,
-- the same refusals naming the same field, the same call data, and the same
-- stored call and request fingerprint, so that one idempotency key used
-- over HTTP and over SQL with one call is one task.
--
-- The API's reading of a signature and of an ABI is go-ethereum's
-- accounts/abi (its selector parser, abi.JSON and NewType); the functions
-- below follow it step by step, quirks included (a tuple array of a fixed
-- size cannot be written in a signature; an unknown type anywhere in an ABI
-- refuses the whole ABI), because a call SQL takes and HTTP refuses, or the
-- reverse, would be two products. TestEnqueue_CallValidationMatchesHTTP runs
-- both on the same cases.
--
-- A type is read into a jsonb node: k (kind: int, uint, bool, address,
-- string, bytes, fbytes, function, slice, array, tuple), s (its canonical
-- text, accounts/abi's Type.String), n (bits of an integer, bytes of an
-- fbytes, elements of an array), e (an array's or slice's element), c (a
-- tuple's components) and names (their names as written), d (dynamic in the
-- ABI encoding) and f (values a value of it holds before any dynamic array,
-- at most 1025: calldata.fixedElems).

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ledgerq.keccak256(p bytea) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
-- Keccak-256 (the original padding, 0x01, as Ethereum uses it; not
-- SHA3-256). The state is 25 variables, a{x}{y} the lane at (x, y), and
-- each round of the permutation is written out: about twice as fast in
-- PL/pgSQL as loops over an array, which matters since send_tx runs one
-- per checksummed address and per call's selector.
DECLARE
    rc bigint[] := ARRAY[
        x'0000000000000001'::bigint, x'0000000000008082'::bigint, x'800000000000808A'::bigint, x'8000000080008000'::bigint,
        x'000000000000808B'::bigint, x'0000000080000001'::bigint, x'8000000080008081'::bigint, x'8000000000008009'::bigint,
        x'000000000000008A'::bigint, x'0000000000000088'::bigint, x'0000000080008009'::bigint, x'000000008000000A'::bigint,
        x'000000008000808B'::bigint, x'800000000000008B'::bigint, x'8000000000008089'::bigint, x'8000000000008003'::bigint,
        x'8000000000008002'::bigint, x'8000000000000080'::bigint, x'000000000000800A'::bigint, x'800000008000000A'::bigint,
        x'8000000080008081'::bigint, x'8000000000008080'::bigint, x'0000000080000001'::bigint, x'8000000080008008'::bigint];
    a00 bigint := 0; a10 bigint := 0; a20 bigint := 0; a30 bigint := 0; a40 bigint := 0; a01 bigint := 0; a11 bigint := 0; a21 bigint := 0; a31 bigint := 0; a41 bigint := 0; a02 bigint := 0; a12 bigint := 0; a22 bigint := 0; a32 bigint := 0; a42 bigint := 0; a03 bigint := 0; a13 bigint := 0; a23 bigint := 0; a33 bigint := 0; a43 bigint := 0; a04 bigint := 0; a14 bigint := 0; a24 bigint := 0; a34 bigint := 0; a44 bigint := 0;
    b00 bigint; b10 bigint; b20 bigint; b30 bigint; b40 bigint;
    b01 bigint; b11 bigint; b21 bigint; b31 bigint; b41 bigint;
    b02 bigint; b12 bigint; b22 bigint; b32 bigint; b42 bigint;
    b03 bigint; b13 bigint; b23 bigint; b33 bigint; b43 bigint;
    b04 bigint; b14 bigint; b24 bigint; b34 bigint; b44 bigint;
    c0 bigint; c1 bigint; c2 bigint; c3 bigint; c4 bigint;
    d0 bigint; d1 bigint; d2 bigint; d3 bigint; d4 bigint;
    msg bytea;
    n   int;
    o   int;
BEGIN
    n := 136 - octet_length(p) % 136;
    msg := p || decode(repeat('00', n), 'hex');
    msg := set_byte(msg, octet_length(p), 1);
    msg := set_byte(msg, octet_length(msg) - 1, get_byte(msg, octet_length(msg) - 1) | 128);
    FOR blk IN 0 .. octet_length(msg) / 136 - 1 LOOP
        o := blk * 136;
        a00 := a00 # ((get_byte(msg, o + 0)::bigint << 0) | (get_byte(msg, o + 1)::bigint << 8) | (get_byte(msg, o + 2)::bigint << 16) | (get_byte(msg, o + 3)::bigint << 24) | (get_byte(msg, o + 4)::bigint << 32) | (get_byte(msg, o + 5)::bigint << 40) | (get_byte(msg, o + 6)::bigint << 48) | (get_byte(msg, o + 7)::bigint << 56));
        a10 := a10 # ((get_byte(msg, o + 8)::bigint << 0) | (get_byte(msg, o + 9)::bigint << 8) | (get_byte(msg, o + 10)::bigint << 16) | (get_byte(msg, o + 11)::bigint << 24) | (get_byte(msg, o + 12)::bigint << 32) | (get_byte(msg, o + 13)::bigint << 40) | (get_byte(msg, o + 14)::bigint << 48) | (get_byte(msg, o + 15)::bigint << 56));
        a20 := a20 # ((get_byte(msg, o + 16)::bigint << 0) | (get_byte(msg, o + 17)::bigint << 8) | (get_byte(msg, o + 18)::bigint << 16) | (get_byte(msg, o + 19)::bigint << 24) | (get_byte(msg, o + 20)::bigint << 32) | (get_byte(msg, o + 21)::bigint << 40) | (get_byte(msg, o + 22)::bigint << 48) | (get_byte(msg, o + 23)::bigint << 56));
        a30 := a30 # ((get_byte(msg, o + 24)::bigint << 0) | (get_byte(msg, o + 25)::bigint << 8) | (get_byte(msg, o + 26)::bigint << 16) | (get_byte(msg, o + 27)::bigint << 24) | (get_byte(msg, o + 28)::bigint << 32) | (get_byte(msg, o + 29)::bigint << 40) | (get_byte(msg, o + 30)::bigint << 48) | (get_byte(msg, o + 31)::bigint << 56));
        a40 := a40 # ((get_byte(msg, o + 32)::bigint << 0) | (get_byte(msg, o + 33)::bigint << 8) | (get_byte(msg, o + 34)::bigint << 16) | (get_byte(msg, o + 35)::bigint << 24) | (get_byte(msg, o + 36)::bigint << 32) | (get_byte(msg, o + 37)::bigint << 40) | (get_byte(msg, o + 38)::bigint << 48) | (get_byte(msg, o + 39)::bigint << 56));
        a01 := a01 # ((get_byte(msg, o + 40)::bigint << 0) | (get_byte(msg, o + 41)::bigint << 8) | (get_byte(msg, o + 42)::bigint << 16) | (get_byte(msg, o + 43)::bigint << 24) | (get_byte(msg, o + 44)::bigint << 32) | (get_byte(msg, o + 45)::bigint << 40) | (get_byte(msg, o + 46)::bigint << 48) | (get_byte(msg, o + 47)::bigint << 56));
        a11 := a11 # ((get_byte(msg, o + 48)::bigint << 0) | (get_byte(msg, o + 49)::bigint << 8) | (get_byte(msg, o + 50)::bigint << 16) | (get_byte(msg, o + 51)::bigint << 24) | (get_byte(msg, o + 52)::bigint << 32) | (get_byte(msg, o + 53)::bigint << 40) | (get_byte(msg, o + 54)::bigint << 48) | (get_byte(msg, o + 55)::bigint << 56));
        a21 := a21 # ((get_byte(msg, o + 56)::bigint << 0) | (get_byte(msg, o + 57)::bigint << 8) | (get_byte(msg, o + 58)::bigint << 16) | (get_byte(msg, o + 59)::bigint << 24) | (get_byte(msg, o + 60)::bigint << 32) | (get_byte(msg, o + 61)::bigint << 40) | (get_byte(msg, o + 62)::bigint << 48) | (get_byte(msg, o + 63)::bigint << 56));
        a31 := a31 # ((get_byte(msg, o + 64)::bigint << 0) | (get_byte(msg, o + 65)::bigint << 8) | (get_byte(msg, o + 66)::bigint << 16) | (get_byte(msg, o + 67)::bigint << 24) | (get_byte(msg, o + 68)::bigint << 32) | (get_byte(msg, o + 69)::bigint << 40) | (get_byte(msg, o + 70)::bigint << 48) | (get_byte(msg, o + 71)::bigint << 56));
        a41 := a41 # ((get_byte(msg, o + 72)::bigint << 0) | (get_byte(msg, o + 73)::bigint << 8) | (get_byte(msg, o + 74)::bigint << 16) | (get_byte(msg, o + 75)::bigint << 24) | (get_byte(msg, o + 76)::bigint << 32) | (get_byte(msg, o + 77)::bigint << 40) | (get_byte(msg, o + 78)::bigint << 48) | (get_byte(msg, o + 79)::bigint << 56));
        a02 := a02 # ((get_byte(msg, o + 80)::bigint << 0) | (get_byte(msg, o + 81)::bigint << 8) | (get_byte(msg, o + 82)::bigint << 16) | (get_byte(msg, o + 83)::bigint << 24) | (get_byte(msg, o + 84)::bigint << 32) | (get_byte(msg, o + 85)::bigint << 40) | (get_byte(msg, o + 86)::bigint << 48) | (get_byte(msg, o + 87)::bigint << 56));
        a12 := a12 # ((get_byte(msg, o + 88)::bigint << 0) | (get_byte(msg, o + 89)::bigint << 8) | (get_byte(msg, o + 90)::bigint << 16) | (get_byte(msg, o + 91)::bigint << 24) | (get_byte(msg, o + 92)::bigint << 32) | (get_byte(msg, o + 93)::bigint << 40) | (get_byte(msg, o + 94)::bigint << 48) | (get_byte(msg, o + 95)::bigint << 56));
        a22 := a22 # ((get_byte(msg, o + 96)::bigint << 0) | (get_byte(msg, o + 97)::bigint << 8) | (get_byte(msg, o + 98)::bigint << 16) | (get_byte(msg, o + 99)::bigint << 24) | (get_byte(msg, o + 100)::bigint << 32) | (get_byte(msg, o + 101)::bigint << 40) | (get_byte(msg, o + 102)::bigint << 48) | (get_byte(msg, o + 103)::bigint << 56));
        a32 := a32 # ((get_byte(msg, o + 104)::bigint << 0) | (get_byte(msg, o + 105)::bigint << 8) | (get_byte(msg, o + 106)::bigint << 16) | (get_byte(msg, o + 107)::bigint << 24) | (get_byte(msg, o + 108)::bigint << 32) | (get_byte(msg, o + 109)::bigint << 40) | (get_byte(msg, o + 110)::bigint << 48) | (get_byte(msg, o + 111)::bigint << 56));
        a42 := a42 # ((get_byte(msg, o + 112)::bigint << 0) | (get_byte(msg, o + 113)::bigint << 8) | (get_byte(msg, o + 114)::bigint << 16) | (get_byte(msg, o + 115)::bigint << 24) | (get_byte(msg, o + 116)::bigint << 32) | (get_byte(msg, o + 117)::bigint << 40) | (get_byte(msg, o + 118)::bigint << 48) | (get_byte(msg, o + 119)::bigint << 56));
        a03 := a03 # ((get_byte(msg, o + 120)::bigint << 0) | (get_byte(msg, o + 121)::bigint << 8) | (get_byte(msg, o + 122)::bigint << 16) | (get_byte(msg, o + 123)::bigint << 24) | (get_byte(msg, o + 124)::bigint << 32) | (get_byte(msg, o + 125)::bigint << 40) | (get_byte(msg, o + 126)::bigint << 48) | (get_byte(msg, o + 127)::bigint << 56));
        a13 := a13 # ((get_byte(msg, o + 128)::bigint << 0) | (get_byte(msg, o + 129)::bigint << 8) | (get_byte(msg, o + 130)::bigint << 16) | (get_byte(msg, o + 131)::bigint << 24) | (get_byte(msg, o + 132)::bigint << 32) | (get_byte(msg, o + 133)::bigint << 40) | (get_byte(msg, o + 134)::bigint << 48) | (get_byte(msg, o + 135)::bigint << 56));
        FOR r IN 1 .. 24 LOOP
            c0 := a00 # a01 # a02 # a03 # a04;
            c1 := a10 # a11 # a12 # a13 # a14;
            c2 := a20 # a21 # a22 # a23 # a24;
            c3 := a30 # a31 # a32 # a33 # a34;
            c4 := a40 # a41 # a42 # a43 # a44;
            d0 := c4 # ((c1 << 1) | ((c1 >> 63) & 1));
            d1 := c0 # ((c2 << 1) | ((c2 >> 63) & 1));
            d2 := c1 # ((c3 << 1) | ((c3 >> 63) & 1));
            d3 := c2 # ((c4 << 1) | ((c4 >> 63) & 1));
            d4 := c3 # ((c0 << 1) | ((c0 >> 63) & 1));
            b00 := (a00 # d0);
            b13 := (((a01 # d0) << 36) | (((a01 # d0) >> 28) & 68719476735));
            b21 := (((a02 # d0) << 3) | (((a02 # d0) >> 61) & 7));
            b34 := (((a03 # d0) << 41) | (((a03 # d0) >> 23) & 2199023255551));
            b42 := (((a04 # d0) << 18) | (((a04 # d0) >> 46) & 262143));
            b02 := (((a10 # d1) << 1) | (((a10 # d1) >> 63) & 1));
            b10 := (((a11 # d1) << 44) | (((a11 # d1) >> 20) & 17592186044415));
            b23 := (((a12 # d1) << 10) | (((a12 # d1) >> 54) & 1023));
            b31 := (((a13 # d1) << 45) | (((a13 # d1) >> 19) & 35184372088831));
            b44 := (((a14 # d1) << 2) | (((a14 # d1) >> 62) & 3));
            b04 := (((a20 # d2) << 62) | (((a20 # d2) >> 2) & 4611686018427387903));
            b12 := (((a21 # d2) << 6) | (((a21 # d2) >> 58) & 63));
            b20 := (((a22 # d2) << 43) | (((a22 # d2) >> 21) & 8796093022207));
            b33 := (((a23 # d2) << 15) | (((a23 # d2) >> 49) & 32767));
            b41 := (((a24 # d2) << 61) | (((a24 # d2) >> 3) & 2305843009213693951));
            b01 := (((a30 # d3) << 28) | (((a30 # d3) >> 36) & 268435455));
            b14 := (((a31 # d3) << 55) | (((a31 # d3) >> 9) & 36028797018963967));
            b22 := (((a32 # d3) << 25) | (((a32 # d3) >> 39) & 33554431));
            b30 := (((a33 # d3) << 21) | (((a33 # d3) >> 43) & 2097151));
            b43 := (((a34 # d3) << 56) | (((a34 # d3) >> 8) & 72057594037927935));
            b03 := (((a40 # d4) << 27) | (((a40 # d4) >> 37) & 134217727));
            b11 := (((a41 # d4) << 20) | (((a41 # d4) >> 44) & 1048575));
            b24 := (((a42 # d4) << 39) | (((a42 # d4) >> 25) & 549755813887));
            b32 := (((a43 # d4) << 8) | (((a43 # d4) >> 56) & 255));
            b40 := (((a44 # d4) << 14) | (((a44 # d4) >> 50) & 16383));
            a00 := b00 # (~b10 & b20);
            a10 := b10 # (~b20 & b30);
            a20 := b20 # (~b30 & b40);
            a30 := b30 # (~b40 & b00);
            a40 := b40 # (~b00 & b10);
            a01 := b01 # (~b11 & b21);
            a11 := b11 # (~b21 & b31);
            a21 := b21 # (~b31 & b41);
            a31 := b31 # (~b41 & b01);
            a41 := b41 # (~b01 & b11);
            a02 := b02 # (~b12 & b22);
            a12 := b12 # (~b22 & b32);
            a22 := b22 # (~b32 & b42);
            a32 := b32 # (~b42 & b02);
            a42 := b42 # (~b02 & b12);
            a03 := b03 # (~b13 & b23);
            a13 := b13 # (~b23 & b33);
            a23 := b23 # (~b33 & b43);
            a33 := b33 # (~b43 & b03);
            a43 := b43 # (~b03 & b13);
            a04 := b04 # (~b14 & b24);
            a14 := b14 # (~b24 & b34);
            a24 := b24 # (~b34 & b44);
            a34 := b34 # (~b44 & b04);
            a44 := b44 # (~b04 & b14);
            a00 := a00 # rc[r];
        END LOOP;
    END LOOP;
    RETURN decode(lpad(to_hex((a00 >> 0) & 255), 2, '0') || lpad(to_hex((a00 >> 8) & 255), 2, '0') || lpad(to_hex((a00 >> 16) & 255), 2, '0') || lpad(to_hex((a00 >> 24) & 255), 2, '0') || lpad(to_hex((a00 >> 32) & 255), 2, '0') || lpad(to_hex((a00 >> 40) & 255), 2, '0') || lpad(to_hex((a00 >> 48) & 255), 2, '0') || lpad(to_hex((a00 >> 56) & 255), 2, '0') || lpad(to_hex((a10 >> 0) & 255), 2, '0') || lpad(to_hex((a10 >> 8) & 255), 2, '0') || lpad(to_hex((a10 >> 16) & 255), 2, '0') || lpad(to_hex((a10 >> 24) & 255), 2, '0') || lpad(to_hex((a10 >> 32) & 255), 2, '0') || lpad(to_hex((a10 >> 40) & 255), 2, '0') || lpad(to_hex((a10 >> 48) & 255), 2, '0') || lpad(to_hex((a10 >> 56) & 255), 2, '0') || lpad(to_hex((a20 >> 0) & 255), 2, '0') || lpad(to_hex((a20 >> 8) & 255), 2, '0') || lpad(to_hex((a20 >> 16) & 255), 2, '0') || lpad(to_hex((a20 >> 24) & 255), 2, '0') || lpad(to_hex((a20 >> 32) & 255), 2, '0') || lpad(to_hex((a20 >> 40) & 255), 2, '0') || lpad(to_hex((a20 >> 48) & 255), 2, '0') || lpad(to_hex((a20 >> 56) & 255), 2, '0') || lpad(to_hex((a30 >> 0) & 255), 2, '0') || lpad(to_hex((a30 >> 8) & 255), 2, '0') || lpad(to_hex((a30 >> 16) & 255), 2, '0') || lpad(to_hex((a30 >> 24) & 255), 2, '0') || lpad(to_hex((a30 >> 32) & 255), 2, '0') || lpad(to_hex((a30 >> 40) & 255), 2, '0') || lpad(to_hex((a30 >> 48) & 255), 2, '0') || lpad(to_hex((a30 >> 56) & 255), 2, '0'), 'hex');
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION ledgerq.abi_refuse(p_field text, p_problem text) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RAISE EXCEPTION 'field %: %', p_field, p_problem USING ERRCODE = 'invalid_parameter_value';
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.abi_refuse(text, text) IS 'Raises send_tx''s refusal of a field: SQLSTATE 22023, "field NAME: PROBLEM" (the API''s 400).';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.abi_short(p text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    -- calldata.short: a text cut for an error message.
    SELECT CASE WHEN octet_length(p) > 80 THEN left(p, 77) || '...' ELSE p END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.abi_short(text) IS 'A client''s text cut to 80 bytes for an error message, as the API cuts it.';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.abi_quote(p text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    -- Go's %q of printable text.
    SELECT '"' || replace(replace(p, '\', '\\'), '"', '\"') || '"'
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.abi_quote(text) IS 'Text in double quotes with its quotes and backslashes escaped (Go''s %q of printable text), for an error message.';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.abi_json_string(p text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    -- Go's encoding/json writes a string as PostgreSQL's to_json does,
    -- and escapes U+2028 and U+2029 besides.
    SELECT replace(replace(to_json(p)::text, U&'\2028', '\u2028'), U&'\2029', '\u2029')
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.abi_json_string(text) IS 'A text as a JSON string, written as Go''s encoding/json writes it (the API''s normal form of a call''s string arguments).';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.abi_kind(p json) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    -- calldata.jsonKind: a JSON value's kind, for an error message.
    SELECT CASE coalesce(json_typeof(p), 'null')
        WHEN 'null' THEN 'null'
        WHEN 'boolean' THEN 'a boolean'
        WHEN 'number' THEN 'the number ' || ledgerq.abi_short(p #>> '{}')
        WHEN 'string' THEN 'a string'
        WHEN 'array' THEN 'an array'
        ELSE 'an object' END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.abi_kind(json) IS 'A JSON value''s kind as the API''s errors name it ("a string", "the number 5").';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.abi_word(p numeric) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    -- One 32-byte word: p in two's complement (p is from -2^255 to 2^256-1).
    SELECT decode(lpad(encode(ledgerq.uint_bytes(CASE WHEN p < 0 THEN p + 2::numeric ^ 256 ELSE p END), 'hex'), 64, '0'), 'hex')
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.abi_word(numeric) IS 'An integer as one ABI word: 32 bytes, big-endian, two''s complement.';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.abi_padded(p bytea) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    -- Bytes right-padded with zeros to a whole number of words.
    SELECT p || decode(repeat('00', (32 - octet_length(p) % 32) % 32), 'hex')
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.abi_padded(bytea) IS 'Bytes right-padded with zeros to a multiple of 32.';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.abi_member(p_obj json, p_key text) RETURNS json
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    -- A member of a JSON object as Go's encoding/json reads a struct field:
    -- its key matched without regard to case, the last such key winning.
    SELECT e.value FROM json_each(p_obj) WITH ORDINALITY AS e(key, value, n)
    WHERE lower(e.key) = lower(p_key) ORDER BY e.n DESC LIMIT 1
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.abi_member(json, text) IS 'A member of a JSON object by its key, matched without regard to case (as Go reads an ABI).';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.abi_camel(p text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    -- accounts/abi's ToCamelCase: the parts between underscores, each
    -- with its first letter upper-cased, joined.
    SELECT coalesce(string_agg(upper(left(part, 1)) || substr(part, 2), '' ORDER BY n), '')
    FROM unnest(string_to_array(p, '_')) WITH ORDINALITY AS x(part, n)
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.abi_camel(text) IS 'A tuple component''s name as go-ethereum''s encoder names its struct field (ToCamelCase).';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.abi_check_json(p json, p_field text, p_max_values int, p_max_depth int) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    -- calldata.checkJSON: the values are counted and the depth measured
    -- walking the value breadth-first, a level at a time.
    level  json[] := ARRAY[p];
    next   json[];
    depth  int := 0;
    values int := 0;
    v      json;
    dup    text;
BEGIN
    WHILE cardinality(level) > 0 LOOP
        values := values + cardinality(level);
        IF p_max_values > 0 AND values > p_max_values THEN
            PERFORM ledgerq.abi_refuse(p_field, format('more than %s values', p_max_values));
        END IF;
        next := ARRAY[]::json[];
        FOREACH v IN ARRAY level LOOP
            CASE json_typeof(v)
            WHEN 'array' THEN
                next := next || ARRAY(SELECT json_array_elements(v));
            WHEN 'object' THEN
                SELECT k INTO dup FROM json_object_keys(v) AS k GROUP BY k HAVING count(*) > 1 LIMIT 1;
                IF dup IS NOT NULL THEN
                    PERFORM ledgerq.abi_refuse(p_field, format('key %s given more than once in one object', ledgerq.abi_quote(dup)));
                END IF;
                next := next || ARRAY(SELECT e.value FROM json_each(v) AS e);
            ELSE
                NULL;
            END CASE;
        END LOOP;
        IF EXISTS (SELECT 1 FROM unnest(level) AS l(x) WHERE json_typeof(l.x) IN ('array', 'object')) THEN
            depth := depth + 1;
            IF depth > p_max_depth THEN
                PERFORM ledgerq.abi_refuse(p_field, format('nested deeper than %s', p_max_depth));
            END IF;
        END IF;
        level := next;
    END LOOP;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.abi_check_json(json, text, int, int) IS 'Refuses JSON with more than a number of values (0: any), nested deeper than a depth, or with a key given twice in one object, before anything is read from it (the API''s calldata.checkJSON).';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.abi_new_type(p_type text, p_internal text, p_components json) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
-- accounts/abi's NewType: a type as an ABI entry writes it (tuples as
-- "tuple" with their components). Raises its problem as a plain message
-- (SQLSTATE 22023); the caller names the field.
DECLARE
    t        text := coalesce(p_type, '');
    internal text := coalesce(p_internal, '');
    i        int;
    elem     jsonb;
    sliced   text;
    runs     text[];
    m        text[];
    size     numeric;
    comps    jsonb := '[]'::jsonb;
    names    jsonb := '[]'::jsonb;
    used     text[] := ARRAY[]::text[];
    c        json;
    ct       jsonb;
    cname    text;
    field    text;
    idx      int := 0;
    dyn      boolean := false;
    fe       numeric := 1;
    expr     text := '(';
BEGIN
    IF length(t) - length(replace(t, '[', '')) <> length(t) - length(replace(t, ']', '')) THEN
        RAISE EXCEPTION 'invalid arg type in abi' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF strpos(t, '[') > 0 THEN
        i := length(t) - strpos(reverse(t), '[') + 1;
        elem := ledgerq.abi_new_type(left(t, i - 1),
            CASE WHEN strpos(internal, '[') > 0 THEN left(internal, length(internal) - strpos(reverse(internal), '[')) ELSE internal END,
            p_components);
        sliced := substr(t, i);
        runs := ARRAY(SELECT r[1] FROM regexp_matches(sliced, '([0-9]+)', 'g') AS r);
        IF cardinality(runs) = 0 THEN
            RETURN jsonb_build_object('k', 'slice', 's', (elem ->> 's') || sliced, 'e', elem, 'd', true, 'f', 1);
        ELSIF cardinality(runs) = 1 THEN
            IF length(ltrim(runs[1], '0')) > 18 AND runs[1]::numeric > 9223372036854775807 THEN
                RAISE EXCEPTION 'abi: error parsing variable size: strconv.Atoi: parsing "%": value out of range', runs[1] USING ERRCODE = 'invalid_parameter_value';
            END IF;
            size := runs[1]::numeric;
            RETURN jsonb_build_object('k', 'array', 's', (elem ->> 's') || sliced, 'n', size, 'e', elem,
                'd', (elem ->> 'd')::boolean, 'f', least(size * (elem ->> 'f')::numeric, 1025));
        END IF;
        RAISE EXCEPTION 'invalid formatting of array type' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- typeRegex's first match: letters, then digits (and x digits).
    m := regexp_match(t, '([a-zA-Z]+)(([0-9]+)(x([0-9]+))?)?');
    IF m IS NULL THEN
        RAISE EXCEPTION 'invalid type ''%''', t USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF m[3] IS NOT NULL THEN
        IF m[2] !~ '^[0-9]+$' OR (length(ltrim(m[2], '0')) > 18 AND m[2]::numeric > 9223372036854775807) THEN
            RAISE EXCEPTION 'abi: error parsing variable size: strconv.Atoi: parsing "%": invalid syntax', m[2] USING ERRCODE = 'invalid_parameter_value';
        END IF;
        size := m[2]::numeric;
    ELSIF m[1] IN ('uint', 'int') THEN
        RAISE EXCEPTION 'unsupported arg type: %', t USING ERRCODE = 'invalid_parameter_value';
    ELSE
        size := 0;
    END IF;
    CASE m[1]
    WHEN 'int', 'uint' THEN
        RETURN jsonb_build_object('k', m[1], 's', t, 'n', size, 'd', false, 'f', 1);
    WHEN 'bool', 'address', 'string', 'function' THEN
        RETURN jsonb_build_object('k', m[1], 's', t, 'n', CASE m[1] WHEN 'address' THEN 20 WHEN 'function' THEN 24 ELSE 0 END,
            'd', m[1] = 'string', 'f', 1);
    WHEN 'bytes' THEN
        IF size = 0 THEN
            RETURN jsonb_build_object('k', 'bytes', 's', t, 'd', true, 'f', 1);
        ELSIF size > 32 THEN
            RAISE EXCEPTION 'unsupported arg type: %', t USING ERRCODE = 'invalid_parameter_value';
        END IF;
        RETURN jsonb_build_object('k', 'fbytes', 's', t, 'n', size, 'd', false, 'f', 1);
    WHEN 'tuple' THEN
        IF p_components IS NOT NULL AND json_typeof(p_components) NOT IN ('array', 'null') THEN
            RAISE EXCEPTION 'json: cannot unmarshal % into Go struct field ArgumentMarshaling.components', json_typeof(p_components) USING ERRCODE = 'invalid_parameter_value';
        END IF;
        FOR c IN SELECT json_array_elements(CASE json_typeof(p_components) WHEN 'array' THEN p_components ELSE '[]'::json END) LOOP
            ct := ledgerq.abi_new_type(ledgerq.abi_string_member(c, 'type'), ledgerq.abi_string_member(c, 'internalType'),
                ledgerq.abi_member(c, 'components'));
            cname := ledgerq.abi_string_member(c, 'name');
            -- ToCamelCase, ResolveNameConflict and isValidFieldName.
            field := ledgerq.abi_camel(cname);
            IF coalesce(field, '') = '' THEN
                RAISE EXCEPTION 'abi: purely anonymous or underscored field is not supported' USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF field = ANY (used) THEN
                FOR j IN 0 .. 1000000 LOOP
                    IF NOT (field || j = ANY (used)) THEN
                        field := field || j;
                        EXIT;
                    END IF;
                END LOOP;
            END IF;
            used := used || field;
            IF field !~ '^[[:alpha:]_][[:alpha:][:digit:]_]*$' THEN
                RAISE EXCEPTION 'field % has invalid name', idx USING ERRCODE = 'invalid_parameter_value';
            END IF;
            comps := comps || jsonb_build_array(ct);
            names := names || to_jsonb(cname);
            expr := expr || CASE WHEN idx > 0 THEN ',' ELSE '' END || (ct ->> 's');
            dyn := dyn OR (ct ->> 'd')::boolean;
            fe := least(fe + (ct ->> 'f')::numeric, 1025);
            idx := idx + 1;
        END LOOP;
        RETURN jsonb_build_object('k', 'tuple', 's', expr || ')', 'c', comps, 'names', names, 'd', dyn, 'f', fe);
    ELSE
        IF internal LIKE 'contract %' THEN
            RETURN jsonb_build_object('k', 'address', 's', 'address', 'n', 20, 'd', false, 'f', 1);
        END IF;
        RAISE EXCEPTION 'unsupported arg type: %', t USING ERRCODE = 'invalid_parameter_value';
    END CASE;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.abi_new_type(text, text, json) IS 'Reads an ABI type (and a tuple''s components) as go-ethereum''s accounts/abi NewType reads it, into the node ledgerq.abi_value encodes by.';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.abi_string_member(p_obj json, p_key text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    v json;
BEGIN
    -- A string member of an ABI entry or argument ('' when absent or null).
    IF p_obj IS NULL OR json_typeof(p_obj) = 'null' THEN
        RETURN '';
    ELSIF json_typeof(p_obj) <> 'object' THEN
        RAISE EXCEPTION 'json: cannot unmarshal % into Go value of type struct', json_typeof(p_obj) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v := ledgerq.abi_member(p_obj, p_key);
    IF v IS NULL OR json_typeof(v) = 'null' THEN
        RETURN '';
    ELSIF json_typeof(v) <> 'string' THEN
        RAISE EXCEPTION 'json: cannot unmarshal % into Go struct field .% of type string', json_typeof(v), p_key USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN v #>> '{}';
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.abi_string_member(json, text) IS 'A string member of an ABI object ('''' when absent or null); another JSON kind is refused, as Go refuses it.';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.abi_check_type(p_t jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    c    jsonb;
    why  text;
BEGIN
    -- calldata.checkType: NULL for a type a call may have, else why not.
    IF (p_t ->> 'f')::numeric > 1024 THEN
        RETURN format('type %s holds more than 1024 values', p_t ->> 's');
    END IF;
    CASE p_t ->> 'k'
    WHEN 'slice', 'array' THEN
        RETURN ledgerq.abi_check_type(p_t -> 'e');
    WHEN 'tuple' THEN
        -- The API's encoder packs a tuple through a struct whose fields are
        -- its components' names camel-cased: two alike fail it.
        SELECT format('tuple %s: components %s and %s are one name to the encoder (%s)', p_t ->> 's',
                ledgerq.abi_quote(a.name), ledgerq.abi_quote(b.name), a.camel) INTO why
        FROM (SELECT x.name, x.n, ledgerq.abi_camel(x.name) AS camel FROM jsonb_array_elements_text(p_t -> 'names') WITH ORDINALITY AS x(name, n)) a
        JOIN (SELECT x.name, x.n, ledgerq.abi_camel(x.name) AS camel FROM jsonb_array_elements_text(p_t -> 'names') WITH ORDINALITY AS x(name, n)) b
          ON a.camel = b.camel AND a.n < b.n
        ORDER BY b.n, a.n LIMIT 1;
        IF why IS NOT NULL THEN
            RETURN why;
        END IF;
        FOR c IN SELECT jsonb_array_elements(p_t -> 'c') LOOP
            why := ledgerq.abi_check_type(c);
            IF why IS NOT NULL THEN
                RETURN why;
            END IF;
        END LOOP;
        RETURN NULL;
    ELSE
        IF (p_t ->> 's') !~ '^(u?int(8|16|24|32|40|48|56|64|72|80|88|96|104|112|120|128|136|144|152|160|168|176|184|192|200|208|216|224|232|240|248|256)|bytes([1-9]|[12][0-9]|3[0-2])?|address|bool|string|function)$' THEN
            RETURN format('unsupported type %s', p_t ->> 's');
        END IF;
        RETURN NULL;
    END CASE;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.abi_check_type(jsonb) IS 'Why a type read by abi_new_type cannot be a call''s argument (no canonical signature has it, or it holds more than 1024 values), or NULL: the API''s calldata.checkType.';

-- The selector parser (accounts/abi ParseSelector). Each step returns what
-- it read and the rest of the text; a composite is a JSON array of what it
-- holds, with "[]" last when it is a tuple array.

-- +goose StatementBegin
CREATE FUNCTION ledgerq.abi_sel_token(p text, p_ident boolean, OUT tok text, OUT rest text)
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
    IF p = '' THEN
        RAISE EXCEPTION 'empty token' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    tok := substring(p FROM CASE WHEN p_ident THEN '^[a-zA-Z$_][a-zA-Z0-9$_]*' ELSE '^[a-zA-Z][a-zA-Z0-9]*' END);
    IF tok IS NULL THEN
        RAISE EXCEPTION 'invalid token start: %', left(p, 1) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    rest := substr(p, length(tok) + 1);
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.abi_sel_token(text, boolean) IS 'The selector parser''s token: a letter (or $ or _ in a name), then letters and digits.';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.abi_sel_type(p text, OUT parsed jsonb, OUT rest text)
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    tok  text;
    list jsonb;
    sub  record;
BEGIN
    IF p = '' THEN
        RAISE EXCEPTION 'empty type' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF left(p, 1) <> '(' THEN
        -- An elementary type, then any array brackets.
        BEGIN
            SELECT t.tok, t.rest INTO tok, rest FROM ledgerq.abi_sel_token(p, false) AS t;
        EXCEPTION WHEN invalid_parameter_value THEN
            RAISE EXCEPTION 'failed to parse elementary type: %', SQLERRM USING ERRCODE = 'invalid_parameter_value';
        END;
        WHILE left(rest, 1) = '[' LOOP
            tok := tok || '[' || coalesce(substring(substr(rest, 2) FROM '^[0-9]*'), '');
            rest := substr(rest, 2 + length(coalesce(substring(substr(rest, 2) FROM '^[0-9]*'), '')));
            IF rest = '' THEN
                RAISE EXCEPTION 'failed to parse array: expected '']'', got end of string' USING ERRCODE = 'invalid_parameter_value';
            ELSIF left(rest, 1) <> ']' THEN
                RAISE EXCEPTION 'failed to parse array: expected '']'', got %', left(rest, 1) USING ERRCODE = 'invalid_parameter_value';
            END IF;
            tok := tok || ']';
            rest := substr(rest, 2);
        END LOOP;
        parsed := to_jsonb(tok);
        RETURN;
    END IF;
    -- A composite: types separated by one character each (the parser does
    -- not look at it), up to ')', then "[]" or nothing.
    BEGIN
        SELECT s.parsed, s.rest INTO sub FROM ledgerq.abi_sel_type(substr(p, 2)) AS s;
    EXCEPTION WHEN invalid_parameter_value THEN
        RAISE EXCEPTION 'failed to parse type: %', SQLERRM USING ERRCODE = 'invalid_parameter_value';
    END;
    list := jsonb_build_array(sub.parsed);
    rest := sub.rest;
    WHILE rest <> '' AND left(rest, 1) <> ')' LOOP
        BEGIN
            SELECT s.parsed, s.rest INTO sub FROM ledgerq.abi_sel_type(substr(rest, 2)) AS s;
        EXCEPTION WHEN invalid_parameter_value THEN
            RAISE EXCEPTION 'failed to parse type: %', SQLERRM USING ERRCODE = 'invalid_parameter_value';
        END;
        list := list || jsonb_build_array(sub.parsed);
        rest := sub.rest;
    END LOOP;
    IF rest = '' OR left(rest, 1) <> ')' THEN
        RAISE EXCEPTION 'expected '')'', got ''%''', rest USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF substr(rest, 2, 2) = '[]' THEN
        parsed := list || '["[]"]'::jsonb;
        rest := substr(rest, 4);
    ELSE
        parsed := list;
        rest := substr(rest, 2);
    END IF;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.abi_sel_type(text) IS 'The selector parser''s type: an elementary type with its array brackets, or a parenthesised composite (a tuple), and the text after it.';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.abi_sel_args(p jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    -- assembleArgs: what the parser read, as ABI arguments (named name0,
    -- name1, …), with an int or uint without its size read as Solidity
    -- reads it (256 bits: calldata.sizeless).
    out  jsonb := '[]'::jsonb;
    a    jsonb;
    sub  jsonb;
    typ  text;
    i    int := 0;
BEGIN
    FOR a IN SELECT jsonb_array_elements(p) LOOP
        IF jsonb_typeof(a) = 'string' THEN
            typ := regexp_replace(a #>> '{}', '^(u?int)(\[|$)', '\1256\2');
            out := out || jsonb_build_array(jsonb_build_object('name', 'name' || i, 'type', typ, 'internalType', typ));
        ELSE
            typ := 'tuple';
            IF jsonb_array_length(a) > 0 AND a -> -1 = '"[]"'::jsonb THEN
                a := a - (-1);
                typ := 'tuple[]';
            END IF;
            sub := ledgerq.abi_sel_args(a);
            out := out || jsonb_build_array(jsonb_build_object('name', 'name' || i, 'type', typ, 'internalType', typ, 'components', sub));
        END IF;
        i := i + 1;
    END LOOP;
    RETURN out;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.abi_sel_args(jsonb) IS 'The selector parser''s types as ABI arguments (the parser''s assembleArgs, with sizeless integers as 256 bits).';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.abi_parse_function(p_sig text, p_field text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    -- calldata.parseFunction: {"sig": the canonical signature, "inputs":
    -- [{"name", "t": node}]}. Refusals name p_field.
    sig    text := regexp_replace(coalesce(p_sig, ''), '\s+', '', 'g');
    name   text;
    rest   text;
    args   jsonb := '[]'::jsonb;
    deep   int := 0;
    depth  int := 0;
    ch     text;
    arg    jsonb;
    node   jsonb;
    why    text;
    inputs jsonb := '[]'::jsonb;
    types  text[] := ARRAY[]::text[];
    sub    record;
BEGIN
    IF length(sig) > 1024 THEN
        PERFORM ledgerq.abi_refuse(p_field, 'longer than 1024 characters');
    END IF;
    IF sig !~ '^[A-Za-z_$][A-Za-z0-9_$]*\(.*\)$' THEN
        PERFORM ledgerq.abi_refuse(p_field, 'must be a name and its argument types in parentheses, such as transfer(address,uint256)');
    END IF;
    FOREACH ch IN ARRAY regexp_split_to_array(regexp_replace(sig, '[^()]', '', 'g'), '') LOOP
        depth := depth + CASE ch WHEN '(' THEN 1 ELSE -1 END;
        deep := greatest(deep, depth);
    END LOOP;
    IF deep > 8 THEN
        PERFORM ledgerq.abi_refuse(p_field, 'tuples nest deeper than 8');
    END IF;
    BEGIN
        SELECT t.tok, t.rest INTO name, rest FROM ledgerq.abi_sel_token(sig, true) AS t;
        IF left(rest, 2) = '()' THEN
            rest := substr(rest, 3);
        ELSE
            SELECT s.parsed, s.rest INTO sub FROM ledgerq.abi_sel_type(rest) AS s;
            IF jsonb_typeof(sub.parsed) <> 'array' THEN
                RAISE EXCEPTION 'expected ''('', got %', left(rest, 1) USING ERRCODE = 'invalid_parameter_value';
            END IF;
            args := sub.parsed;
            rest := sub.rest;
        END IF;
        IF rest <> '' THEN
            RAISE EXCEPTION 'unexpected string ''%''', rest USING ERRCODE = 'invalid_parameter_value';
        END IF;
    EXCEPTION WHEN invalid_parameter_value THEN
        PERFORM ledgerq.abi_refuse(p_field, format('failed to parse selector ''%s'': %s', sig, SQLERRM));
    END;
    FOR arg IN SELECT jsonb_array_elements(ledgerq.abi_sel_args(args)) LOOP
        BEGIN
            node := ledgerq.abi_new_type(arg ->> 'type', arg ->> 'internalType', (arg -> 'components')::json);
        EXCEPTION WHEN invalid_parameter_value THEN
            PERFORM ledgerq.abi_refuse(p_field, SQLERRM);
        END;
        why := ledgerq.abi_check_type(node);
        IF why IS NOT NULL THEN
            PERFORM ledgerq.abi_refuse(p_field, why);
        END IF;
        inputs := inputs || jsonb_build_array(jsonb_build_object('name', '', 't', node));
        types := types || (node ->> 's');
    END LOOP;
    RETURN jsonb_build_object('sig', name || '(' || array_to_string(types, ',') || ')', 'inputs', inputs);
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.abi_parse_function(text, text) IS 'Reads a function signature as the API does (calldata.parseFunction): its canonical signature and its argument types.';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.abi_read_args(p json, p_what text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    -- An ABI entry's inputs or outputs, each read by NewType (as
    -- abi.JSON reads them): [{"name", "t": node}].
    out jsonb := '[]'::jsonb;
    a   json;
BEGIN
    IF p IS NULL OR json_typeof(p) = 'null' THEN
        RETURN out;
    ELSIF json_typeof(p) <> 'array' THEN
        RAISE EXCEPTION 'json: cannot unmarshal % into Go struct field .%s of type []abi.Argument', json_typeof(p), p_what USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR a IN SELECT json_array_elements(p) LOOP
        IF json_typeof(a) NOT IN ('object', 'null') THEN
            RAISE EXCEPTION 'argument json err: json: cannot unmarshal % into Go value of type abi.ArgumentMarshaling', json_typeof(a) USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF json_typeof(a) = 'object' AND ledgerq.abi_member(a, 'indexed') IS NOT NULL
           AND json_typeof(ledgerq.abi_member(a, 'indexed')) NOT IN ('boolean', 'null') THEN
            RAISE EXCEPTION 'argument json err: json: cannot unmarshal % into Go struct field ArgumentMarshaling.indexed of type bool', json_typeof(ledgerq.abi_member(a, 'indexed')) USING ERRCODE = 'invalid_parameter_value';
        END IF;
        out := out || jsonb_build_array(jsonb_build_object('name', ledgerq.abi_string_member(a, 'name'),
            't', ledgerq.abi_new_type(ledgerq.abi_string_member(a, 'type'), ledgerq.abi_string_member(a, 'internalType'),
                CASE WHEN json_typeof(a) = 'object' THEN ledgerq.abi_member(a, 'components') END)));
    END LOOP;
    RETURN out;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.abi_read_args(json, text) IS 'An ABI entry''s inputs or outputs read as abi.JSON reads them.';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.abi_parse_abi(p_abi json, p_method text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    -- calldata.parseABIMethod and findMethod: {"sig", "inputs": [{"name",
    -- "t"}], "abi": the ABI as an array without insignificant whitespace}.
    raw      text := btrim(p_abi::text, E' \t\n\r');
    compact  text;
    entry    json;
    input_t  jsonb;
    etype    text;
    ename    text;
    inputs   jsonb;
    want     text := '';
    types    text[];
    sig      text;
    fallback boolean := false;
    receive  boolean := false;
    funcs    jsonb := '[]'::jsonb;
    found    jsonb;
    named    text[];
    every    text[] := ARRAY[]::text[];
    why      text;
    v        json;
    k        text;
BEGIN
    IF octet_length(p_abi::text) > 131072 THEN
        PERFORM ledgerq.abi_refuse('abi', 'larger than 131072 bytes');
    END IF;
    PERFORM ledgerq.abi_check_json(p_abi, 'abi', 0, 32);
    IF left(raw, 1) = '{' THEN
        raw := '[' || raw || ']';
    END IF;
    IF left(raw, 1) <> '[' THEN
        PERFORM ledgerq.abi_refuse('abi', 'must be an ABI entry (an object) or an array of entries');
    END IF;
    -- json.Compact: whitespace outside strings goes.
    compact := regexp_replace(raw, '("(?:[^"\\]|\\.)*")|[ \t\n\r]+', '\1', 'g');
    BEGIN
        FOR entry IN SELECT json_array_elements(compact::json) LOOP
            IF json_typeof(entry) NOT IN ('object', 'null') THEN
                RAISE EXCEPTION 'json: cannot unmarshal % into Go value of type struct', json_typeof(entry) USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF json_typeof(entry) = 'object' THEN
                FOREACH k IN ARRAY ARRAY['constant', 'payable', 'anonymous'] LOOP
                    v := ledgerq.abi_member(entry, k);
                    IF v IS NOT NULL AND json_typeof(v) NOT IN ('boolean', 'null') THEN
                        RAISE EXCEPTION 'json: cannot unmarshal % into Go struct field .% of type bool', json_typeof(v), k USING ERRCODE = 'invalid_parameter_value';
                    END IF;
                END LOOP;
            END IF;
            etype := ledgerq.abi_string_member(entry, 'type');
            ename := ledgerq.abi_string_member(entry, 'name');
            PERFORM ledgerq.abi_string_member(entry, 'stateMutability');
            inputs := ledgerq.abi_read_args(CASE WHEN json_typeof(entry) = 'object' THEN ledgerq.abi_member(entry, 'inputs') END, 'inputs');
            PERFORM ledgerq.abi_read_args(CASE WHEN json_typeof(entry) = 'object' THEN ledgerq.abi_member(entry, 'outputs') END, 'outputs');
            CASE etype
            WHEN 'function' THEN
                types := ARRAY(SELECT i -> 't' ->> 's' FROM jsonb_array_elements(inputs) WITH ORDINALITY AS x(i, n) ORDER BY n);
                sig := ename || '(' || array_to_string(types, ',') || ')';
                every := every || sig;
                funcs := funcs || jsonb_build_array(jsonb_build_object('name', ename, 'sig', sig, 'inputs', inputs));
            WHEN 'constructor', 'event', 'error' THEN
                NULL;
            WHEN 'fallback' THEN
                IF fallback THEN
                    RAISE EXCEPTION 'only single fallback is allowed' USING ERRCODE = 'invalid_parameter_value';
                END IF;
                fallback := true;
            WHEN 'receive' THEN
                IF receive THEN
                    RAISE EXCEPTION 'only single receive is allowed' USING ERRCODE = 'invalid_parameter_value';
                END IF;
                IF ledgerq.abi_string_member(entry, 'stateMutability') <> 'payable' THEN
                    RAISE EXCEPTION 'the statemutability of receive can only be payable' USING ERRCODE = 'invalid_parameter_value';
                END IF;
                receive := true;
            ELSE
                RAISE EXCEPTION 'abi: could not recognize type % of field %', etype, ename USING ERRCODE = 'invalid_parameter_value';
            END CASE;
        END LOOP;
    EXCEPTION WHEN invalid_parameter_value THEN
        PERFORM ledgerq.abi_refuse('abi', 'not a valid ABI: ' || SQLERRM);
    END;
    -- The method, by its name, or by its signature when it has one (an
    -- overloaded name must be given as one).
    IF p_method LIKE '%(%' THEN
        want := ledgerq.abi_parse_function(p_method, 'method') ->> 'sig';
    END IF;
    SELECT coalesce(jsonb_agg(f ORDER BY n), '[]'::jsonb), coalesce(array_agg(f ->> 'sig'), ARRAY[]::text[]) INTO found, named
    FROM jsonb_array_elements(funcs) WITH ORDINALITY AS x(f, n)
    WHERE (want <> '' AND f ->> 'sig' = want) OR (want = '' AND f ->> 'name' = p_method);
    IF jsonb_array_length(found) > 1 THEN
        PERFORM ledgerq.abi_refuse('method', format('%s is overloaded in the abi: name it by its signature, one of %s',
            ledgerq.abi_quote(p_method), (SELECT string_agg(s, ', ' ORDER BY s COLLATE "C") FROM unnest(named) AS s)));
    ELSIF jsonb_array_length(found) = 0 AND cardinality(every) = 0 THEN
        PERFORM ledgerq.abi_refuse('method', 'the abi has no function');
    ELSIF jsonb_array_length(found) = 0 THEN
        PERFORM ledgerq.abi_refuse('method', format('the abi has no function %s (it has %s)',
            ledgerq.abi_quote(p_method), (SELECT string_agg(s, ', ' ORDER BY s COLLATE "C") FROM unnest(every) AS s)));
    END IF;
    FOR input_t IN SELECT i -> 't' FROM jsonb_array_elements(found -> 0 -> 'inputs') AS i LOOP
        why := ledgerq.abi_check_type(input_t);
        IF why IS NOT NULL THEN
            PERFORM ledgerq.abi_refuse('abi', format('function %s: %s', found -> 0 ->> 'sig', why));
        END IF;
    END LOOP;
    RETURN jsonb_build_object('sig', found -> 0 -> 'sig', 'inputs', found -> 0 -> 'inputs', 'abi', compact);
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.abi_parse_abi(json, text) IS 'Reads an ABI (an entry, or an array of entries) and finds the method the call names in it, as the API does (calldata.parseABIMethod and findMethod).';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.abi_integer(p_t jsonb, p_v json, p_at text) RETURNS numeric
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    -- calldata.integer: a decimal string, 0x hex (either with a leading -
    -- for a signed type), or a JSON number a JSON client holds exactly.
    txt    text;
    digits text;
    neg    boolean := false;
    hex    boolean := false;
    n      numeric := 0;
    lo     numeric := 0;
    hi     numeric := 2::numeric ^ (p_t ->> 'n')::int;
BEGIN
    CASE coalesce(json_typeof(p_v), 'null')
    WHEN 'number' THEN
        txt := p_v #>> '{}';
        IF txt !~ '^-?(0|[1-9][0-9]*)$' THEN
            PERFORM ledgerq.abi_refuse(p_at, format('JSON number %s is not a whole number without fraction or exponent: write it as a decimal string', ledgerq.abi_short(txt)));
        END IF;
        IF length(ltrim(txt, '-0')) > 16 OR abs(txt::numeric) > 9007199254740991 THEN
            PERFORM ledgerq.abi_refuse(p_at, format('JSON number %s is beyond 2^53-1, which JSON clients do not hold exactly: write it as a decimal string', ledgerq.abi_short(txt)));
        END IF;
        n := txt::numeric;
    WHEN 'string' THEN
        txt := p_v #>> '{}';
        digits := txt;
        IF left(digits, 1) = '-' THEN
            neg := true;
            digits := substr(digits, 2);
        END IF;
        IF left(digits, 2) = '0x' THEN
            hex := true;
            digits := substr(digits, 3);
        END IF;
        IF digits = '' OR (NOT hex AND digits !~ '^[0-9]+$') OR (hex AND digits !~ '^[0-9a-fA-F]+$') THEN
            PERFORM ledgerq.abi_refuse(p_at, format('%s is not an integer (decimal, or 0x hex)', ledgerq.abi_quote(ledgerq.abi_short(txt))));
        END IF;
        -- Past leading zeros, 80 digits hold any 256-bit integer: a longer
        -- string is not read at all.
        digits := ltrim(digits, '0');
        IF length(digits) > 80 THEN
            PERFORM ledgerq.abi_refuse(p_at, format('%s does not fit %s', ledgerq.abi_short(txt), p_t ->> 's'));
        END IF;
        IF hex THEN
            FOR i IN 1 .. length(digits) LOOP
                n := n * 16 + position(lower(substr(digits, i, 1)) IN '0123456789abcdef') - 1;
            END LOOP;
        ELSE
            n := ('0' || digits)::numeric;
        END IF;
        IF neg THEN
            n := -n;
        END IF;
    ELSE
        PERFORM ledgerq.abi_refuse(p_at, format('must be an integer for %s (a decimal string, 0x hex, or a JSON number up to 2^53-1), got %s', p_t ->> 's', ledgerq.abi_kind(p_v)));
    END CASE;
    IF p_t ->> 'k' = 'int' THEN
        hi := hi / 2;
        lo := -hi;
    END IF;
    IF n < lo OR n >= hi THEN
        PERFORM ledgerq.abi_refuse(p_at, format('%s does not fit %s', ledgerq.abi_short(txt), p_t ->> 's'));
    END IF;
    RETURN trunc(n);
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.abi_integer(jsonb, json, text) IS 'Reads a call''s integer argument as the API does (calldata.integer) and checks that it fits its type.';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.abi_hex(p_t jsonb, p_v json, p_at text) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    s text;
BEGIN
    -- calldata.hexBytes: 0x and an even number of hex digits.
    IF coalesce(json_typeof(p_v), 'null') <> 'string' OR left(p_v #>> '{}', 2) <> '0x' THEN
        PERFORM ledgerq.abi_refuse(p_at, format('must be 0x-prefixed hex for %s', p_t ->> 's'));
    END IF;
    s := substr(p_v #>> '{}', 3);
    IF s !~ '^([0-9a-fA-F]{2})*$' THEN
        PERFORM ledgerq.abi_refuse(p_at, format('must be 0x and an even number of hex digits for %s', p_t ->> 's'));
    END IF;
    RETURN decode(s, 'hex');
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.abi_hex(jsonb, json, text) IS 'Reads a call''s bytes argument: 0x and an even number of hex digits.';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.abi_sequence(p_types jsonb[], p_encs bytea[]) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    -- The ABI encoding of a sequence of encoded values (a tuple's
    -- components, an array's elements): a static value in place, a dynamic
    -- one as the offset of its encoding after the heads.
    heads bytea := '\x'::bytea;
    tails bytea := '\x'::bytea;
    size  int := 0;
BEGIN
    FOR i IN 1 .. coalesce(cardinality(p_types), 0) LOOP
        size := size + CASE WHEN (p_types[i] ->> 'd')::boolean THEN 32 ELSE octet_length(p_encs[i]) END;
    END LOOP;
    FOR i IN 1 .. coalesce(cardinality(p_types), 0) LOOP
        IF (p_types[i] ->> 'd')::boolean THEN
            heads := heads || ledgerq.abi_word(size + octet_length(tails));
            tails := tails || p_encs[i];
        ELSE
            heads := heads || p_encs[i];
        END IF;
    END LOOP;
    RETURN heads || tails;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.abi_sequence(jsonb[], bytea[]) IS 'ABI-encodes a sequence of encoded values: heads (static values, offsets of dynamic ones), then tails.';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.abi_value(p_t jsonb, p_v json, p_at text, p_named boolean, OUT enc bytea, OUT norm text)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    -- calldata.value and normalise: a JSON value read as its ABI type, its
    -- encoding, and its normal form (integers as decimal strings,
    -- checksummed addresses, lower-case hex bytes, tuples as arrays).
    kind   text := p_t ->> 'k';
    s      text;
    b      bytea;
    n      numeric;
    list   json[];
    paths  text[];
    types  jsonb[] := ARRAY[]::jsonb[];
    encs   bytea[] := ARRAY[]::bytea[];
    norms  text[] := ARRAY[]::text[];
    names  text[];
    cnt    int;
    r      record;
    k      text;
BEGIN
    CASE kind
    WHEN 'int', 'uint' THEN
        n := ledgerq.abi_integer(p_t, p_v, p_at);
        enc := ledgerq.abi_word(n);
        norm := '"' || n::text || '"';
    WHEN 'bool' THEN
        IF coalesce(json_typeof(p_v), 'null') <> 'boolean' THEN
            PERFORM ledgerq.abi_refuse(p_at, format('must be true or false for bool, got %s', ledgerq.abi_kind(p_v)));
        END IF;
        enc := ledgerq.abi_word(CASE WHEN (p_v #>> '{}')::boolean THEN 1 ELSE 0 END);
        norm := p_v #>> '{}';
    WHEN 'string' THEN
        IF coalesce(json_typeof(p_v), 'null') <> 'string' THEN
            PERFORM ledgerq.abi_refuse(p_at, format('must be a JSON string for string, got %s', ledgerq.abi_kind(p_v)));
        END IF;
        s := p_v #>> '{}';
        b := convert_to(s, 'UTF8');
        enc := ledgerq.abi_word(octet_length(b)) || ledgerq.abi_padded(b);
        norm := ledgerq.abi_json_string(s);
    WHEN 'address' THEN
        s := CASE WHEN json_typeof(p_v) = 'string' THEN p_v #>> '{}' END;
        IF s IS NULL OR s !~ '^0x[0-9a-fA-F]{40}$' THEN
            PERFORM ledgerq.abi_refuse(p_at, 'must be an address, 0x and 40 hex digits');
        END IF;
        -- One Keccak-256 an address (the checksum's), in PL/pgSQL the most
        -- of what reading it costs.
        norm := ledgerq.eip55(lower(substr(s, 3)));
        IF substr(s, 3) <> lower(substr(s, 3)) AND substr(s, 3) <> upper(substr(s, 3)) AND norm <> s THEN
            PERFORM ledgerq.abi_refuse(p_at, format('mixed-case address with a wrong EIP-55 checksum (write it in one case, or as %s if that is the one meant)', norm));
        END IF;
        enc := decode(repeat('00', 12) || lower(substr(s, 3)), 'hex');
        norm := '"' || norm || '"';
    WHEN 'bytes' THEN
        b := ledgerq.abi_hex(p_t, p_v, p_at);
        enc := ledgerq.abi_word(octet_length(b)) || ledgerq.abi_padded(b);
        norm := '"0x' || encode(b, 'hex') || '"';
    WHEN 'fbytes', 'function' THEN
        b := ledgerq.abi_hex(p_t, p_v, p_at);
        IF octet_length(b) <> (p_t ->> 'n')::int THEN
            PERFORM ledgerq.abi_refuse(p_at, format('%s takes exactly %s bytes, got %s', p_t ->> 's', p_t ->> 'n', octet_length(b)));
        END IF;
        enc := ledgerq.abi_padded(b);
        norm := '"0x' || encode(b, 'hex') || '"';
    WHEN 'slice', 'array' THEN
        IF coalesce(json_typeof(p_v), 'null') <> 'array' THEN
            PERFORM ledgerq.abi_refuse(p_at, format('must be a JSON array for %s, got %s', p_t ->> 's', ledgerq.abi_kind(p_v)));
        END IF;
        list := ARRAY(SELECT json_array_elements(p_v));
        cnt := coalesce(cardinality(list), 0);
        IF kind = 'array' AND cnt <> (p_t ->> 'n')::numeric THEN
            PERFORM ledgerq.abi_refuse(p_at, format('%s takes exactly %s elements, got %s', p_t ->> 's', p_t ->> 'n', cnt));
        END IF;
        IF kind = 'slice' AND cnt * (p_t -> 'e' ->> 'f')::numeric > 1024 THEN
            PERFORM ledgerq.abi_refuse(p_at, 'more than 1024 values');
        END IF;
        FOR i IN 1 .. cnt LOOP
            SELECT x.enc, x.norm INTO r FROM ledgerq.abi_value(p_t -> 'e', list[i], format('%s[%s]', p_at, i - 1), p_named) AS x;
            types := types || (p_t -> 'e');
            encs := encs || r.enc;
            norms := norms || r.norm;
        END LOOP;
        enc := CASE WHEN kind = 'slice' THEN ledgerq.abi_word(cnt) ELSE '\x'::bytea END || ledgerq.abi_sequence(types, encs);
        norm := '[' || array_to_string(norms, ',') || ']';
    WHEN 'tuple' THEN
        cnt := jsonb_array_length(p_t -> 'c');
        names := ARRAY(SELECT x FROM jsonb_array_elements_text(p_t -> 'names') WITH ORDINALITY AS y(x, o) ORDER BY o);
        CASE coalesce(json_typeof(p_v), 'null')
        WHEN 'array' THEN
            list := ARRAY(SELECT json_array_elements(p_v));
            IF coalesce(cardinality(list), 0) <> cnt THEN
                PERFORM ledgerq.abi_refuse(p_at, format('tuple %s has %s components, got %s', p_t ->> 's', cnt, coalesce(cardinality(list), 0)));
            END IF;
            paths := ARRAY(SELECT format('%s[%s]', p_at, i) FROM generate_series(0, cnt - 1) AS i ORDER BY i);
        WHEN 'object' THEN
            IF NOT p_named THEN
                PERFORM ledgerq.abi_refuse(p_at, 'a tuple of a signature has no component names: write it as an array, or send an abi');
            END IF;
            FOR k IN SELECT json_object_keys(p_v) LOOP
                IF NOT (k = ANY (names)) THEN
                    PERFORM ledgerq.abi_refuse(p_at, format('unknown component %s (tuple %s has %s)', ledgerq.abi_quote(k), p_t ->> 's', array_to_string(names, ', ')));
                END IF;
            END LOOP;
            list := ARRAY[]::json[];
            paths := ARRAY[]::text[];
            FOR i IN 1 .. cnt LOOP
                IF NOT EXISTS (SELECT 1 FROM json_object_keys(p_v) AS x WHERE x = names[i]) THEN
                    PERFORM ledgerq.abi_refuse(p_at, format('missing component %s', ledgerq.abi_quote(names[i])));
                END IF;
                list := list || (p_v -> names[i]);
                paths := paths || (p_at || '.' || names[i]);
            END LOOP;
        ELSE
            PERFORM ledgerq.abi_refuse(p_at, format('must be a JSON array (or an object, with an abi) for tuple %s, got %s', p_t ->> 's', ledgerq.abi_kind(p_v)));
        END CASE;
        FOR i IN 1 .. cnt LOOP
            SELECT x.enc, x.norm INTO r FROM ledgerq.abi_value(p_t -> 'c' -> (i - 1), list[i], paths[i], p_named) AS x;
            types := types || (p_t -> 'c' -> (i - 1));
            encs := encs || r.enc;
            norms := norms || r.norm;
        END LOOP;
        enc := ledgerq.abi_sequence(types, encs);
        norm := '[' || array_to_string(norms, ',') || ']';
    ELSE
        PERFORM ledgerq.abi_refuse(p_at, format('type %s is not supported', p_t ->> 's'));
    END CASE;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.abi_value(jsonb, json, text, boolean) IS 'Reads a call''s argument as its ABI type, as the API does (calldata.value): its ABI encoding and its normal form, or a refusal naming the argument.';

-- +goose StatementBegin
CREATE FUNCTION ledgerq.abi_call(p_function text, p_abi json, p_method text, p_args json,
    OUT data bytea, OUT call jsonb, OUT abi_compact text, OUT args_normal text)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    -- calldata.Encode: the call a function (or an ABI's method) and its
    -- arguments name, encoded; call is what the task stores of it
    -- (store.TaskCall), abi_compact and args_normal the texts the request
    -- fingerprint hashes.
    m      jsonb;
    named  boolean := false;
    args   json[] := ARRAY[]::json[];
    inputs jsonb;
    at     text;
    r      record;
    types  jsonb[] := ARRAY[]::jsonb[];
    encs   bytea[] := ARRAY[]::bytea[];
    norms  text[] := ARRAY[]::text[];
    n      int;
BEGIN
    -- A json null is no ABI, as the API's body reads "abi": null.
    IF json_typeof(p_abi) = 'null' THEN
        p_abi := NULL;
    END IF;
    IF p_function IS NOT NULL AND p_function <> '' AND (p_abi IS NOT NULL OR coalesce(p_method, '') <> '') THEN
        PERFORM ledgerq.abi_refuse('function', 'give function, or abi and method, not both');
    ELSIF p_function IS NOT NULL AND p_function <> '' THEN
        m := ledgerq.abi_parse_function(p_function, 'function');
    ELSIF p_abi IS NOT NULL AND coalesce(p_method, '') = '' THEN
        PERFORM ledgerq.abi_refuse('method', 'required with abi: the name (or signature) of the function to call');
    ELSIF p_abi IS NOT NULL THEN
        m := ledgerq.abi_parse_abi(p_abi, p_method);
        named := true;
        abi_compact := m ->> 'abi';
    ELSIF coalesce(p_method, '') <> '' THEN
        PERFORM ledgerq.abi_refuse('abi', 'required with method: the ABI the method is in');
    ELSE
        PERFORM ledgerq.abi_refuse('function', 'required: a function signature, or abi and method');
    END IF;
    -- calldata.readArgs: none, or an array within the bounds.
    IF p_args IS NOT NULL AND json_typeof(p_args) <> 'null' THEN
        PERFORM ledgerq.abi_check_json(p_args, 'args', 1024, 8);
        IF json_typeof(p_args) <> 'array' THEN
            PERFORM ledgerq.abi_refuse('args', 'must be an array of the function''s arguments');
        END IF;
        args := ARRAY(SELECT json_array_elements(p_args));
    END IF;
    inputs := m -> 'inputs';
    n := jsonb_array_length(inputs);
    IF coalesce(cardinality(args), 0) <> n THEN
        PERFORM ledgerq.abi_refuse('args', format('function %s takes %s arguments, got %s', m ->> 'sig', n, coalesce(cardinality(args), 0)));
    END IF;
    FOR i IN 1 .. n LOOP
        at := format('args[%s]', i - 1);
        IF named AND inputs -> (i - 1) ->> 'name' <> '' THEN
            at := at || ' (' || (inputs -> (i - 1) ->> 'name') || ')';
        END IF;
        SELECT x.enc, x.norm INTO r FROM ledgerq.abi_value(inputs -> (i - 1) -> 't', args[i], at, named) AS x;
        types := types || (inputs -> (i - 1) -> 't');
        encs := encs || r.enc;
        norms := norms || r.norm;
    END LOOP;
    data := substring(ledgerq.keccak256(convert_to(m ->> 'sig', 'UTF8')) FROM 1 FOR 4) || ledgerq.abi_sequence(types, encs);
    args_normal := '[' || array_to_string(norms, ',') || ']';
    call := jsonb_build_object('function', m ->> 'sig', 'args', args_normal::jsonb);
    IF named THEN
        call := call || jsonb_build_object('method', p_method, 'abi', abi_compact::jsonb);
    END IF;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.abi_call(text, json, text, json) IS 'Encodes the contract call a function signature (or an ABI''s method) and its JSON arguments name, as POST send-tx encodes it (internal/calldata): its call data, the call the task stores, and the ABI and arguments in the forms the request fingerprint hashes. Refusals are SQLSTATE 22023 naming the field.';

-- send_tx takes the call (function, abi, method, args) after its other
-- fields; data's default becomes NULL, so that a call with data is
-- refused as the API refuses it. The old signature goes: two overloads
-- with defaults would make every call by named arguments ambiguous.
REVOKE ALL ON FUNCTION ledgerq.send_tx(text, text, numeric, bytea, text, bigint, numeric, numeric, integer, boolean) FROM ledgerq_enqueue;
DROP FUNCTION ledgerq.send_tx(text, text, numeric, bytea, text, bigint, numeric, numeric, integer, boolean);

-- +goose StatementBegin
CREATE FUNCTION ledgerq.send_tx(
    wallet text, to_address text,
    value numeric DEFAULT 0, data bytea DEFAULT NULL,
    idempotency_key text DEFAULT NULL, gas_limit bigint DEFAULT NULL,
    max_fee_per_gas numeric DEFAULT NULL, max_priority_fee_per_gas numeric DEFAULT NULL,
    priority integer DEFAULT 0, preflight boolean DEFAULT true,
    function text DEFAULT NULL, abi json DEFAULT NULL, method text DEFAULT NULL, args json DEFAULT NULL
) RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    max_uint256 CONSTANT numeric := 2::numeric ^ 256 - 1;
    p_value     numeric := coalesce(value, 0);
    p_data      bytea := coalesce(data, '\x'::bytea);
    p_priority  integer := coalesce(priority, 0);
    p_preflight boolean := coalesce(preflight, true);
    ceiling     numeric;
    w_chain     bigint;
    w_sender    text;
    w_source    text;
    w_disabled  boolean;
    to_lower    text;
    hash        bytea;
    task_id     text;
    stored      record;
    refusal     jsonb;
    now_        timestamptz := clock_timestamp();
    id_bytes    bytea;
    shard_key   text;
    shard_state ledgerq.shard_state;
    shard_more  boolean;
    fld         record;
    msg         text;
    p_abi       json := CASE WHEN json_typeof(abi) = 'null' THEN NULL ELSE abi END;
    p_args      json := CASE WHEN json_typeof(args) = 'null' THEN NULL ELSE args END;
    c_data      bytea;
    c_call      jsonb;
    c_abi       text;
    c_args      text;
    call_size   bigint;
BEGIN
    -- The wallet, and whether the caller may use it: an unknown wallet and
    -- one not granted are the same refusal, as the API's 404 is.
    SELECT d.chain_id, d.sender, d.source, d.disabled INTO w_chain, w_sender, w_source, w_disabled
    FROM ledgerq.wallet_directory d WHERE d.wallet_id = wallet;
    IF NOT FOUND OR NOT EXISTS (
        SELECT 1 FROM ledgerq.enqueue_grants g
        WHERE (g.wallet_id = wallet OR g.wallet_id = '*')
          AND (g.role_name = session_user::text
               OR (EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = g.role_name)
                   AND pg_catalog.pg_has_role(session_user, g.role_name, 'MEMBER')))
    ) THEN
        RAISE EXCEPTION 'wallet %: no such wallet, or role % may not enqueue for it (ledgerq.enqueue_grants)', wallet, session_user
            USING ERRCODE = 'insufficient_privilege';
    END IF;

    -- The fields, in the order and with the words of the API's
    -- validateSendTx (internal/httpapi/wallets.go).
    IF to_address IS NULL OR to_address = '' THEN
        RAISE EXCEPTION 'field to: required (0x and 40 hex digits)' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF to_address !~ '^0x[0-9a-fA-F]{40}$' THEN
        RAISE EXCEPTION 'field to: must be 0x and 40 hex digits' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    to_lower := lower(to_address);
    IF substr(to_address, 3) <> lower(substr(to_address, 3)) AND substr(to_address, 3) <> upper(substr(to_address, 3))
       AND ledgerq.eip55(substr(to_lower, 3)) <> to_address THEN
        RAISE EXCEPTION 'field to: mixed-case address with a wrong EIP-55 checksum (write it in one case, or as % if that is the one meant)',
            ledgerq.eip55(substr(to_lower, 3)) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_value = 'NaN'::numeric OR p_value < 0 OR p_value > max_uint256 OR p_value <> trunc(p_value) THEN
        RAISE EXCEPTION 'field value: must be a whole number of wei from 0 to 2^256-1, as a decimal string or 0x hex' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(p_data) > 131072 THEN
        RAISE EXCEPTION 'field data: larger than 131072 bytes' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The contract-call form (the API's encodeCall): a function, or an ABI
    -- and a method, with args, encoded here into the task's data.
    IF send_tx.function IS NOT NULL OR p_abi IS NOT NULL OR send_tx.method IS NOT NULL OR p_args IS NOT NULL THEN
        IF data IS NOT NULL THEN
            RAISE EXCEPTION 'field data: not with function or abi, which name a call for the server to encode: send one or the other' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        SELECT x.data, x.call, x.abi_compact, x.args_normal INTO c_data, c_call, c_abi, c_args
        FROM ledgerq.abi_call(send_tx.function, p_abi, send_tx.method, p_args) AS x;
        IF octet_length(c_data) > 131072 THEN
            RAISE EXCEPTION 'field args: the call encodes to % bytes of data, more than 131072', octet_length(c_data) USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- The call as the API stores it (json.Marshal of store.TaskCall,
        -- which writes <, > and & as \u003c, \u003e and \u0026).
        call_size := octet_length(format('{"function":%s,%s"args":%s}', to_json(c_call ->> 'function'),
            CASE WHEN c_abi IS NULL THEN '' ELSE format('"method":%s,"abi":%s,', to_json(send_tx.method), c_abi) END, c_args));
        call_size := call_size + 5 * (length(coalesce(c_call ->> 'function', '') || coalesce(send_tx.method, '') || coalesce(c_abi, '') || c_args)
            - length(translate(coalesce(c_call ->> 'function', '') || coalesce(send_tx.method, '') || coalesce(c_abi, '') || c_args, '<>&', '')));
        IF call_size > 262144 THEN
            RAISE EXCEPTION 'fields abi and args: the call is % bytes as stored, more than 262144', call_size USING ERRCODE = 'invalid_parameter_value';
        END IF;
        p_data := c_data;
    END IF;
    IF gas_limit IS NOT NULL AND (gas_limit < 21000 OR gas_limit > 9007199254740991) THEN
        RAISE EXCEPTION 'field gas_limit: must be from 21000 (a plain transfer) to 9007199254740991' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT s.value::numeric INTO ceiling FROM ledgerq.settings s WHERE s.name = 'wallet_max_fee_per_gas';
    FOR fld IN SELECT * FROM (VALUES (1, 'max_priority_fee_per_gas', max_priority_fee_per_gas), (2, 'max_fee_per_gas', max_fee_per_gas)) f(n, name, v) ORDER BY n LOOP
        CONTINUE WHEN fld.v IS NULL;
        IF fld.v = 'NaN'::numeric OR fld.v < 0 OR fld.v > max_uint256 OR fld.v <> trunc(fld.v) THEN
            RAISE EXCEPTION 'field %: must be a whole number of wei from 0 to 2^256-1, as a decimal string or 0x hex', fld.name USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF fld.v > ceiling THEN
            RAISE EXCEPTION 'field %: % wei per gas is above this server''s ceiling of % (--wallet-max-fee-per-gas)', fld.name, fld.v, ceiling USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;
    IF max_priority_fee_per_gas IS NOT NULL AND max_fee_per_gas IS NOT NULL AND max_priority_fee_per_gas > max_fee_per_gas THEN
        RAISE EXCEPTION 'field max_fee_per_gas: must be at least max_priority_fee_per_gas (%)', max_priority_fee_per_gas USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The API's checkIdempotencyKey (its header, here a field).
    IF idempotency_key IS NOT NULL AND (idempotency_key = '' OR length(idempotency_key) > 256) THEN
        RAISE EXCEPTION 'field idempotency_key: must be 1 to 256 characters' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF idempotency_key IS NOT NULL AND idempotency_key !~ '^[\x20-\x7e]*$' THEN
        RAISE EXCEPTION 'field idempotency_key: must be printable ASCII' USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- A wallet added at run time is held (FOR SHARE) until the caller's
    -- commit, as the API's insert holds it, so that it cannot be removed
    -- while the task is stored; a disabled one takes no new task.
    IF w_source = 'runtime' THEN
        SELECT wl.disabled INTO w_disabled FROM ledgerq.wallets wl WHERE wl.name = wallet FOR SHARE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'wallet %: no such wallet, or role % may not enqueue for it (ledgerq.enqueue_grants)', wallet, session_user
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        IF w_disabled AND NOT (idempotency_key IS NOT NULL AND EXISTS (
            SELECT 1 FROM ledgerq.wallet_tasks t WHERE t.wallet_id = wallet AND t.idempotency_key = send_tx.idempotency_key)) THEN
            RAISE EXCEPTION 'wallet "%" is disabled: it takes no new task', wallet USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
    END IF;

    -- store.TaskRequestHash: each field is its length (8 bytes, big-endian)
    -- and its bytes, so a key used over HTTP and over SQL with one body is
    -- one task.
    hash := ledgerq.send_tx_field(convert_to('ledgerq send-tx v1', 'UTF8'))
        || ledgerq.send_tx_field(int8send(w_chain))
        || ledgerq.send_tx_field(convert_to(w_sender, 'UTF8'))
        || ledgerq.send_tx_field(convert_to(to_lower, 'UTF8'))
        || ledgerq.send_tx_field(ledgerq.uint_bytes(p_value))
        || ledgerq.send_tx_field(p_data)
        || ledgerq.send_tx_field(CASE WHEN gas_limit IS NULL THEN '\x'::bytea ELSE int8send(gas_limit) END)
        || ledgerq.send_tx_field(int4send(p_priority));
    IF max_priority_fee_per_gas IS NOT NULL OR max_fee_per_gas IS NOT NULL THEN
        hash := hash || ledgerq.send_tx_field(convert_to('fees', 'UTF8'))
            || ledgerq.send_tx_field(CASE WHEN max_priority_fee_per_gas IS NULL THEN '\x'::bytea ELSE '\x01'::bytea || ledgerq.uint_bytes(max_priority_fee_per_gas) END)
            || ledgerq.send_tx_field(CASE WHEN max_fee_per_gas IS NULL THEN '\x'::bytea ELSE '\x01'::bytea || ledgerq.uint_bytes(max_fee_per_gas) END);
    END IF;
    IF c_call IS NOT NULL THEN
        hash := hash || ledgerq.send_tx_field(convert_to('call', 'UTF8'))
            || ledgerq.send_tx_field(convert_to(c_call ->> 'function', 'UTF8'))
            || ledgerq.send_tx_field(convert_to(coalesce(CASE WHEN c_abi IS NOT NULL THEN send_tx.method END, ''), 'UTF8'))
            || ledgerq.send_tx_field(convert_to(coalesce(c_abi, ''), 'UTF8'))
            || ledgerq.send_tx_field(convert_to(c_args, 'UTF8'));
    END IF;
    IF NOT p_preflight THEN
        hash := hash || ledgerq.send_tx_field(convert_to('no preflight', 'UTF8'));
    END IF;
    hash := sha256(hash);

    -- The wallet's policy (ledgerq.wallet_policy_refusal locks its row; the
    -- insert below is a separate statement, so its snapshot is taken after
    -- the lock and sees the tasks of the intakes before it). A refusal is
    -- raised, so its record goes with the caller's transaction.
    refusal := ledgerq.wallet_policy_refusal(wallet, w_chain, w_sender, to_lower, p_value, p_data, idempotency_key, now_);
    IF refusal IS NOT NULL THEN
        msg := format('refused by the policy of wallet "%s": ', wallet) || CASE refusal ->> 'rule'
            WHEN 'recipient' THEN format('%s is not an allowed recipient', to_lower)
            WHEN 'contract' THEN format('%s is not an allowed contract', to_lower)
            WHEN 'selector' THEN format('function %s is not allowed on contract %s', refusal ->> 'selector', to_lower)
            WHEN 'max_value' THEN format('value %s wei is above the largest value per transaction, %s wei', refusal ->> 'requested', refusal ->> 'limit')
            WHEN 'value_window' THEN format('value %s wei would bring the value sent in %s to more than its cap, %s wei (%s used)',
                refusal ->> 'requested', ledgerq.go_duration((refusal ->> 'window_seconds')::bigint), refusal ->> 'limit', refusal ->> 'used')
            WHEN 'fee_window' THEN format('the fees of %s reached their cap, %s wei (%s used, counting transactions in flight at their worst case)',
                ledgerq.go_duration((refusal ->> 'window_seconds')::bigint), refusal ->> 'limit', refusal ->> 'used')
            ELSE refusal ->> 'rule' END;
        RAISE EXCEPTION '%', msg USING ERRCODE = 'raise_exception', DETAIL = refusal::text;
    END IF;

    -- A UUIDv7 of the statement's time (store.newUUIDv7).
    id_bytes := substring(int8send((extract(epoch FROM now_) * 1000)::bigint) FROM 3 FOR 6) || substring(uuid_send(gen_random_uuid()) FROM 7 FOR 10);
    id_bytes := set_byte(id_bytes, 6, (get_byte(id_bytes, 6) & 15) | 112);
    id_bytes := set_byte(id_bytes, 8, (get_byte(id_bytes, 8) & 63) | 128);
    task_id := encode(id_bytes, 'hex');
    task_id := substr(task_id, 1, 8) || '-' || substr(task_id, 9, 4) || '-' || substr(task_id, 13, 4) || '-' || substr(task_id, 17, 4) || '-' || substr(task_id, 21, 12);

    -- store.TaskInsert's statement (the policy was applied above). A
    -- conflict on the key waits for the transaction that holds it to end.
    INSERT INTO ledgerq.wallet_tasks (
        id, wallet_id, chain_id, sender, priority, status, to_address, value_wei, data, gas_limit,
        idempotency_key, request_hash, created_at, updated_at, tip_cap_wei, fee_cap_wei, call, preflight
    ) VALUES (
        task_id, wallet, w_chain, w_sender, p_priority, 0, to_lower, p_value, p_data, gas_limit,
        idempotency_key, hash, now_, now_, max_priority_fee_per_gas, max_fee_per_gas, c_call, p_preflight
    )
    ON CONFLICT ON CONSTRAINT wallet_tasks_idempotency_key_unique DO NOTHING;
    IF NOT FOUND THEN
        SELECT t.id, t.request_hash INTO stored FROM ledgerq.wallet_tasks t
        WHERE t.wallet_id = wallet AND t.idempotency_key = send_tx.idempotency_key;
        IF stored.request_hash <> hash THEN
            RAISE EXCEPTION 'idempotency key "%": wallet "%" already has task % under this key, stored from a different request',
                idempotency_key, wallet, stored.id USING ERRCODE = 'unique_violation';
        END IF;
        task_id := stored.id;
    END IF;

    -- The wallet's shard, scheduled as store.scheduleCommitted schedules it
    -- (queries/shards.sql ShardSchedule), in the caller's transaction: the
    -- shard becomes pending, and ledgerq_shards is notified, when the
    -- caller commits, and not at all when it rolls back. A shard pending,
    -- or running with more_work, needs nothing and takes no lock.
    shard_key := format('wallet:%s:%s', w_chain, w_sender);
    SELECT sh.state, sh.more_work INTO shard_state, shard_more FROM ledgerq.shards sh WHERE sh.key = shard_key;
    IF NOT FOUND OR NOT (shard_state = 'pending' OR (shard_state = 'running' AND shard_more)) THEN
        INSERT INTO ledgerq.shards AS s (key, state, scheduled_at, created_at, updated_at)
        VALUES (shard_key, 'pending', now_, now_, now_)
        ON CONFLICT (key) DO UPDATE
        SET state = CASE WHEN s.state = 'idle' THEN 'pending'::ledgerq.shard_state ELSE s.state END,
            scheduled_at = CASE WHEN s.state = 'idle' THEN now_ ELSE s.scheduled_at END,
            more_work = (s.state = 'running'),
            updated_at = now_
        WHERE s.state = 'idle' OR (s.state = 'running' AND NOT s.more_work)
        RETURNING s.state INTO shard_state;
        IF FOUND AND shard_state = 'pending' THEN
            PERFORM pg_notify('ledgerq_shards', '');
        END IF;
    END IF;
    RETURN task_id;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.send_tx(text, text, numeric, bytea, text, bigint, numeric, numeric, integer, boolean, text, json, text, json) IS 'Stores a send-tx task of the wallet in the caller''s transaction, validated as POST /v1/wallets/{wallet}/send-tx validates it, and returns its id (a contract call by function, or by abi and method, with args, is encoded as the API encodes it); the task exists, and its wallet''s shard is woken, when the caller commits. Refusals: 22023 (a field, "field NAME: …"), 23505 (the idempotency key holds another request), 42501 (no such wallet, or not granted in enqueue_grants), 55000 (the wallet is disabled), P0001 (the wallet''s policy; DETAIL is the refusal as JSON). docs/enqueue.md.';
REVOKE ALL ON FUNCTION ledgerq.send_tx(text, text, numeric, bytea, text, bigint, numeric, numeric, integer, boolean, text, json, text, json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ledgerq.send_tx(text, text, numeric, bytea, text, bigint, numeric, numeric, integer, boolean, text, json, text, json) TO ledgerq_enqueue;

-- The encoder's functions are send_tx's: no caller of the role runs them.
REVOKE ALL ON FUNCTION ledgerq.abi_call(text, json, text, json) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledgerq.abi_value(jsonb, json, text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledgerq.abi_sequence(jsonb[], bytea[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledgerq.abi_hex(jsonb, json, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledgerq.abi_integer(jsonb, json, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledgerq.abi_parse_abi(json, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledgerq.abi_read_args(json, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledgerq.abi_parse_function(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledgerq.abi_sel_args(jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledgerq.abi_sel_type(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledgerq.abi_sel_token(text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledgerq.abi_check_type(jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledgerq.abi_string_member(json, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledgerq.abi_new_type(text, text, json) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledgerq.abi_check_json(json, text, int, int) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledgerq.abi_member(json, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledgerq.abi_padded(bytea) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledgerq.abi_word(numeric) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledgerq.abi_kind(json) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledgerq.abi_json_string(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledgerq.abi_quote(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledgerq.abi_short(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledgerq.abi_camel(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledgerq.abi_refuse(text, text) FROM PUBLIC;

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ledgerq.keccak256(p bytea) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    -- Keccak-f[1600] on 25 lanes of 64 bits (bigint, bitwise); rate 136
    -- bytes, Keccak's own padding (0x01 … 0x80, not SHA-3's 0x06).
    rc   bigint[] := ARRAY[
        x'0000000000000001'::bigint, x'0000000000008082'::bigint, x'800000000000808A'::bigint, x'8000000080008000'::bigint,
        x'000000000000808B'::bigint, x'0000000080000001'::bigint, x'8000000080008081'::bigint, x'8000000000008009'::bigint,
        x'000000000000008A'::bigint, x'0000000000000088'::bigint, x'0000000080008009'::bigint, x'000000008000000A'::bigint,
        x'000000008000808B'::bigint, x'800000000000008B'::bigint, x'8000000000008089'::bigint, x'8000000000008003'::bigint,
        x'8000000000008002'::bigint, x'8000000000000080'::bigint, x'000000000000800A'::bigint, x'800000008000000A'::bigint,
        x'8000000080008081'::bigint, x'8000000000008080'::bigint, x'0000000080000001'::bigint, x'8000000080008008'::bigint];
    rotc int[] := ARRAY[1, 3, 6, 10, 15, 21, 28, 36, 45, 55, 2, 14, 27, 41, 56, 8, 25, 43, 62, 18, 39, 61, 20, 44];
    piln int[] := ARRAY[10, 7, 11, 17, 18, 3, 5, 16, 8, 21, 24, 4, 15, 23, 19, 13, 12, 2, 20, 14, 22, 9, 6, 1];
    s    bigint[] := array_fill(0::bigint, ARRAY[25]);
    c    bigint[] := array_fill(0::bigint, ARRAY[5]);
    msg  bytea;
    d    bigint;
    t    bigint;
    bc   bigint;
    lane bigint;
    n    int;
    out  bytea := '\x'::bytea;
BEGIN
    n := 136 - octet_length(p) % 136;
    msg := p || decode(repeat('00', n), 'hex');
    msg := set_byte(msg, octet_length(p), 1);
    msg := set_byte(msg, octet_length(msg) - 1, get_byte(msg, octet_length(msg) - 1) | 128);
    FOR blk IN 0 .. octet_length(msg) / 136 - 1 LOOP
        FOR i IN 0 .. 16 LOOP
            lane := 0;
            FOR k IN REVERSE 7 .. 0 LOOP
                lane := (lane << 8) | get_byte(msg, blk * 136 + i * 8 + k);
            END LOOP;
            s[i + 1] := s[i + 1] # lane;
        END LOOP;
        FOR r IN 1 .. 24 LOOP
            FOR x IN 0 .. 4 LOOP
                c[x + 1] := s[x + 1] # s[x + 6] # s[x + 11] # s[x + 16] # s[x + 21];
            END LOOP;
            FOR x IN 0 .. 4 LOOP
                t := c[(x + 1) % 5 + 1];
                d := c[(x + 4) % 5 + 1] # ((t << 1) | ((t >> 63) & 1));
                FOR y IN 0 .. 4 LOOP
                    s[x + 5 * y + 1] := s[x + 5 * y + 1] # d;
                END LOOP;
            END LOOP;
            t := s[2];
            FOR i IN 1 .. 24 LOOP
                bc := s[piln[i] + 1];
                s[piln[i] + 1] := (t << rotc[i]) | ((t >> (64 - rotc[i])) & ((1::bigint << rotc[i]) - 1));
                t := bc;
            END LOOP;
            FOR y IN 0 .. 4 LOOP
                FOR x IN 0 .. 4 LOOP
                    c[x + 1] := s[5 * y + x + 1];
                END LOOP;
                FOR x IN 0 .. 4 LOOP
                    s[5 * y + x + 1] := c[x + 1] # (~c[(x + 1) % 5 + 1] & c[(x + 2) % 5 + 1]);
                END LOOP;
            END LOOP;
            s[1] := s[1] # rc[r];
        END LOOP;
    END LOOP;
    FOR i IN 1 .. 4 LOOP
        FOR k IN 0 .. 7 LOOP
            out := out || decode(lpad(to_hex((s[i] >> (8 * k)) & 255), 2, '0'), 'hex');
        END LOOP;
    END LOOP;
    RETURN out;
END
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION ledgerq.send_tx(text, text, numeric, bytea, text, bigint, numeric, numeric, integer, boolean, text, json, text, json) FROM ledgerq_enqueue;
DROP FUNCTION ledgerq.send_tx(text, text, numeric, bytea, text, bigint, numeric, numeric, integer, boolean, text, json, text, json);

-- +goose StatementBegin
CREATE FUNCTION ledgerq.send_tx(
    wallet text, to_address text,
    value numeric DEFAULT 0, data bytea DEFAULT '\x'::bytea,
    idempotency_key text DEFAULT NULL, gas_limit bigint DEFAULT NULL,
    max_fee_per_gas numeric DEFAULT NULL, max_priority_fee_per_gas numeric DEFAULT NULL,
    priority integer DEFAULT 0, preflight boolean DEFAULT true
) RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    max_uint256 CONSTANT numeric := 2::numeric ^ 256 - 1;
    p_value     numeric := coalesce(value, 0);
    p_data      bytea := coalesce(data, '\x'::bytea);
    p_priority  integer := coalesce(priority, 0);
    p_preflight boolean := coalesce(preflight, true);
    ceiling     numeric;
    w_chain     bigint;
    w_sender    text;
    w_source    text;
    w_disabled  boolean;
    to_lower    text;
    hash        bytea;
    task_id     text;
    stored      record;
    refusal     jsonb;
    now_        timestamptz := clock_timestamp();
    id_bytes    bytea;
    shard_key   text;
    shard_state ledgerq.shard_state;
    shard_more  boolean;
    fld         record;
    msg         text;
BEGIN
    -- The wallet, and whether the caller may use it: an unknown wallet and
    -- one not granted are the same refusal, as the API's 404 is.
    SELECT d.chain_id, d.sender, d.source, d.disabled INTO w_chain, w_sender, w_source, w_disabled
    FROM ledgerq.wallet_directory d WHERE d.wallet_id = wallet;
    IF NOT FOUND OR NOT EXISTS (
        SELECT 1 FROM ledgerq.enqueue_grants g
        WHERE (g.wallet_id = wallet OR g.wallet_id = '*')
          AND (g.role_name = session_user::text
               OR (EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = g.role_name)
                   AND pg_catalog.pg_has_role(session_user, g.role_name, 'MEMBER')))
    ) THEN
        RAISE EXCEPTION 'wallet %: no such wallet, or role % may not enqueue for it (ledgerq.enqueue_grants)', wallet, session_user
            USING ERRCODE = 'insufficient_privilege';
    END IF;

    -- The fields, in the order and with the words of the API's
    -- validateSendTx (internal/httpapi/wallets.go).
    IF to_address IS NULL OR to_address = '' THEN
        RAISE EXCEPTION 'field to: required (0x and 40 hex digits)' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF to_address !~ '^0x[0-9a-fA-F]{40}$' THEN
        RAISE EXCEPTION 'field to: must be 0x and 40 hex digits' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    to_lower := lower(to_address);
    IF substr(to_address, 3) <> lower(substr(to_address, 3)) AND substr(to_address, 3) <> upper(substr(to_address, 3))
       AND ledgerq.eip55(substr(to_lower, 3)) <> to_address THEN
        RAISE EXCEPTION 'field to: mixed-case address with a wrong EIP-55 checksum (write it in one case, or as % if that is the one meant)',
            ledgerq.eip55(substr(to_lower, 3)) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_value = 'NaN'::numeric OR p_value < 0 OR p_value > max_uint256 OR p_value <> trunc(p_value) THEN
        RAISE EXCEPTION 'field value: must be a whole number of wei from 0 to 2^256-1, as a decimal string or 0x hex' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(p_data) > 131072 THEN
        RAISE EXCEPTION 'field data: larger than 131072 bytes' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF gas_limit IS NOT NULL AND (gas_limit < 21000 OR gas_limit > 9007199254740991) THEN
        RAISE EXCEPTION 'field gas_limit: must be from 21000 (a plain transfer) to 9007199254740991' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT s.value::numeric INTO ceiling FROM ledgerq.settings s WHERE s.name = 'wallet_max_fee_per_gas';
    FOR fld IN SELECT * FROM (VALUES (1, 'max_priority_fee_per_gas', max_priority_fee_per_gas), (2, 'max_fee_per_gas', max_fee_per_gas)) f(n, name, v) ORDER BY n LOOP
        CONTINUE WHEN fld.v IS NULL;
        IF fld.v = 'NaN'::numeric OR fld.v < 0 OR fld.v > max_uint256 OR fld.v <> trunc(fld.v) THEN
            RAISE EXCEPTION 'field %: must be a whole number of wei from 0 to 2^256-1, as a decimal string or 0x hex', fld.name USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF fld.v > ceiling THEN
            RAISE EXCEPTION 'field %: % wei per gas is above this server''s ceiling of % (--wallet-max-fee-per-gas)', fld.name, fld.v, ceiling USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;
    IF max_priority_fee_per_gas IS NOT NULL AND max_fee_per_gas IS NOT NULL AND max_priority_fee_per_gas > max_fee_per_gas THEN
        RAISE EXCEPTION 'field max_fee_per_gas: must be at least max_priority_fee_per_gas (%)', max_priority_fee_per_gas USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The API's checkIdempotencyKey (its header, here a field).
    IF idempotency_key IS NOT NULL AND (idempotency_key = '' OR length(idempotency_key) > 256) THEN
        RAISE EXCEPTION 'field idempotency_key: must be 1 to 256 characters' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF idempotency_key IS NOT NULL AND idempotency_key !~ '^[\x20-\x7e]*$' THEN
        RAISE EXCEPTION 'field idempotency_key: must be printable ASCII' USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- A wallet added at run time is held (FOR SHARE) until the caller's
    -- commit, as the API's insert holds it, so that it cannot be removed
    -- while the task is stored; a disabled one takes no new task.
    IF w_source = 'runtime' THEN
        SELECT wl.disabled INTO w_disabled FROM ledgerq.wallets wl WHERE wl.name = wallet FOR SHARE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'wallet %: no such wallet, or role % may not enqueue for it (ledgerq.enqueue_grants)', wallet, session_user
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        IF w_disabled AND NOT (idempotency_key IS NOT NULL AND EXISTS (
            SELECT 1 FROM ledgerq.wallet_tasks t WHERE t.wallet_id = wallet AND t.idempotency_key = send_tx.idempotency_key)) THEN
            RAISE EXCEPTION 'wallet "%" is disabled: it takes no new task', wallet USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
    END IF;

    -- store.TaskRequestHash: each field is its length (8 bytes, big-endian)
    -- and its bytes, so a key used over HTTP and over SQL with one body is
    -- one task.
    hash := ledgerq.send_tx_field(convert_to('ledgerq send-tx v1', 'UTF8'))
        || ledgerq.send_tx_field(int8send(w_chain))
        || ledgerq.send_tx_field(convert_to(w_sender, 'UTF8'))
        || ledgerq.send_tx_field(convert_to(to_lower, 'UTF8'))
        || ledgerq.send_tx_field(ledgerq.uint_bytes(p_value))
        || ledgerq.send_tx_field(p_data)
        || ledgerq.send_tx_field(CASE WHEN gas_limit IS NULL THEN '\x'::bytea ELSE int8send(gas_limit) END)
        || ledgerq.send_tx_field(int4send(p_priority));
    IF max_priority_fee_per_gas IS NOT NULL OR max_fee_per_gas IS NOT NULL THEN
        hash := hash || ledgerq.send_tx_field(convert_to('fees', 'UTF8'))
            || ledgerq.send_tx_field(CASE WHEN max_priority_fee_per_gas IS NULL THEN '\x'::bytea ELSE '\x01'::bytea || ledgerq.uint_bytes(max_priority_fee_per_gas) END)
            || ledgerq.send_tx_field(CASE WHEN max_fee_per_gas IS NULL THEN '\x'::bytea ELSE '\x01'::bytea || ledgerq.uint_bytes(max_fee_per_gas) END);
    END IF;
    IF NOT p_preflight THEN
        hash := hash || ledgerq.send_tx_field(convert_to('no preflight', 'UTF8'));
    END IF;
    hash := sha256(hash);

    -- The wallet's policy (ledgerq.wallet_policy_refusal locks its row; the
    -- insert below is a separate statement, so its snapshot is taken after
    -- the lock and sees the tasks of the intakes before it). A refusal is
    -- raised, so its record goes with the caller's transaction.
    refusal := ledgerq.wallet_policy_refusal(wallet, w_chain, w_sender, to_lower, p_value, p_data, idempotency_key, now_);
    IF refusal IS NOT NULL THEN
        msg := format('refused by the policy of wallet "%s": ', wallet) || CASE refusal ->> 'rule'
            WHEN 'recipient' THEN format('%s is not an allowed recipient', to_lower)
            WHEN 'contract' THEN format('%s is not an allowed contract', to_lower)
            WHEN 'selector' THEN format('function %s is not allowed on contract %s', refusal ->> 'selector', to_lower)
            WHEN 'max_value' THEN format('value %s wei is above the largest value per transaction, %s wei', refusal ->> 'requested', refusal ->> 'limit')
            WHEN 'value_window' THEN format('value %s wei would bring the value sent in %s to more than its cap, %s wei (%s used)',
                refusal ->> 'requested', ledgerq.go_duration((refusal ->> 'window_seconds')::bigint), refusal ->> 'limit', refusal ->> 'used')
            WHEN 'fee_window' THEN format('the fees of %s reached their cap, %s wei (%s used, counting transactions in flight at their worst case)',
                ledgerq.go_duration((refusal ->> 'window_seconds')::bigint), refusal ->> 'limit', refusal ->> 'used')
            ELSE refusal ->> 'rule' END;
        RAISE EXCEPTION '%', msg USING ERRCODE = 'raise_exception', DETAIL = refusal::text;
    END IF;

    -- A UUIDv7 of the statement's time (store.newUUIDv7).
    id_bytes := substring(int8send((extract(epoch FROM now_) * 1000)::bigint) FROM 3 FOR 6) || substring(uuid_send(gen_random_uuid()) FROM 7 FOR 10);
    id_bytes := set_byte(id_bytes, 6, (get_byte(id_bytes, 6) & 15) | 112);
    id_bytes := set_byte(id_bytes, 8, (get_byte(id_bytes, 8) & 63) | 128);
    task_id := encode(id_bytes, 'hex');
    task_id := substr(task_id, 1, 8) || '-' || substr(task_id, 9, 4) || '-' || substr(task_id, 13, 4) || '-' || substr(task_id, 17, 4) || '-' || substr(task_id, 21, 12);

    -- store.TaskInsert's statement (the policy was applied above). A
    -- conflict on the key waits for the transaction that holds it to end.
    INSERT INTO ledgerq.wallet_tasks (
        id, wallet_id, chain_id, sender, priority, status, to_address, value_wei, data, gas_limit,
        idempotency_key, request_hash, created_at, updated_at, tip_cap_wei, fee_cap_wei, call, preflight
    ) VALUES (
        task_id, wallet, w_chain, w_sender, p_priority, 0, to_lower, p_value, p_data, gas_limit,
        idempotency_key, hash, now_, now_, max_priority_fee_per_gas, max_fee_per_gas, NULL, p_preflight
    )
    ON CONFLICT ON CONSTRAINT wallet_tasks_idempotency_key_unique DO NOTHING;
    IF NOT FOUND THEN
        SELECT t.id, t.request_hash INTO stored FROM ledgerq.wallet_tasks t
        WHERE t.wallet_id = wallet AND t.idempotency_key = send_tx.idempotency_key;
        IF stored.request_hash <> hash THEN
            RAISE EXCEPTION 'idempotency key "%": wallet "%" already has task % under this key, stored from a different request',
                idempotency_key, wallet, stored.id USING ERRCODE = 'unique_violation';
        END IF;
        task_id := stored.id;
    END IF;

    -- The wallet's shard, scheduled as store.scheduleCommitted schedules it
    -- (queries/shards.sql ShardSchedule), in the caller's transaction: the
    -- shard becomes pending, and ledgerq_shards is notified, when the
    -- caller commits, and not at all when it rolls back. A shard pending,
    -- or running with more_work, needs nothing and takes no lock.
    shard_key := format('wallet:%s:%s', w_chain, w_sender);
    SELECT sh.state, sh.more_work INTO shard_state, shard_more FROM ledgerq.shards sh WHERE sh.key = shard_key;
    IF NOT FOUND OR NOT (shard_state = 'pending' OR (shard_state = 'running' AND shard_more)) THEN
        INSERT INTO ledgerq.shards AS s (key, state, scheduled_at, created_at, updated_at)
        VALUES (shard_key, 'pending', now_, now_, now_)
        ON CONFLICT (key) DO UPDATE
        SET state = CASE WHEN s.state = 'idle' THEN 'pending'::ledgerq.shard_state ELSE s.state END,
            scheduled_at = CASE WHEN s.state = 'idle' THEN now_ ELSE s.scheduled_at END,
            more_work = (s.state = 'running'),
            updated_at = now_
        WHERE s.state = 'idle' OR (s.state = 'running' AND NOT s.more_work)
        RETURNING s.state INTO shard_state;
        IF FOUND AND shard_state = 'pending' THEN
            PERFORM pg_notify('ledgerq_shards', '');
        END IF;
    END IF;
    RETURN task_id;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION ledgerq.send_tx(text, text, numeric, bytea, text, bigint, numeric, numeric, integer, boolean) IS 'Stores a send-tx task of the wallet in the caller''s transaction, validated as POST /v1/wallets/{wallet}/send-tx validates it, and returns its id; the task exists, and its wallet''s shard is woken, when the caller commits. Refusals: 22023 (a field, "field NAME: …"), 23505 (the idempotency key holds another request), 42501 (no such wallet, or not granted in enqueue_grants), 55000 (the wallet is disabled), P0001 (the wallet''s policy; DETAIL is the refusal as JSON). docs/enqueue.md.';
REVOKE ALL ON FUNCTION ledgerq.send_tx(text, text, numeric, bytea, text, bigint, numeric, numeric, integer, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ledgerq.send_tx(text, text, numeric, bytea, text, bigint, numeric, numeric, integer, boolean) TO ledgerq_enqueue;
DROP FUNCTION ledgerq.abi_call(text, json, text, json);
DROP FUNCTION ledgerq.abi_value(jsonb, json, text, boolean);
DROP FUNCTION ledgerq.abi_sequence(jsonb[], bytea[]);
DROP FUNCTION ledgerq.abi_hex(jsonb, json, text);
DROP FUNCTION ledgerq.abi_integer(jsonb, json, text);
DROP FUNCTION ledgerq.abi_parse_abi(json, text);
DROP FUNCTION ledgerq.abi_read_args(json, text);
DROP FUNCTION ledgerq.abi_parse_function(text, text);
DROP FUNCTION ledgerq.abi_sel_args(jsonb);
DROP FUNCTION ledgerq.abi_sel_type(text);
DROP FUNCTION ledgerq.abi_sel_token(text, boolean);
DROP FUNCTION ledgerq.abi_check_type(jsonb);
DROP FUNCTION ledgerq.abi_string_member(json, text);
DROP FUNCTION ledgerq.abi_new_type(text, text, json);
DROP FUNCTION ledgerq.abi_check_json(json, text, int, int);
DROP FUNCTION ledgerq.abi_member(json, text);
DROP FUNCTION ledgerq.abi_padded(bytea);
DROP FUNCTION ledgerq.abi_word(numeric);
DROP FUNCTION ledgerq.abi_kind(json);
DROP FUNCTION ledgerq.abi_json_string(text);
DROP FUNCTION ledgerq.abi_quote(text);
DROP FUNCTION ledgerq.abi_short(text);
DROP FUNCTION ledgerq.abi_camel(text);
DROP FUNCTION ledgerq.abi_refuse(text, text);
