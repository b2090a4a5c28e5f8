import random, struct, orjson, pydantic_core, time, sys
sys.path.insert(0, "/tmp/hotpath-research/site")
import msgspec
rnd = random.Random(7)
bad = {"orjson": 0, "msgspec": 0}; ex = {}
N = 300000
t0 = time.time()
for i in range(N):
    if i % 3 == 0:
        x = struct.unpack("<d", rnd.getrandbits(64).to_bytes(8, "little"))[0]
        if x != x or x in (float("inf"), float("-inf")): continue
    elif i % 3 == 1:
        x = rnd.uniform(-1, 1) * 10 ** rnd.randint(-12, 25)
    else:
        x = round(rnd.random() * 10 ** rnd.randint(-8, 4), rnd.randint(0, 9))
    ref = pydantic_core.to_json(x)
    if orjson.dumps(x) != ref:
        bad["orjson"] += 1; ex.setdefault("orjson", (x, ref, orjson.dumps(x)))
    if msgspec.json.encode(x) != ref:
        bad["msgspec"] += 1; ex.setdefault("msgspec", (x, ref, msgspec.json.encode(x)))
print("floats:", N, bad, ex, f"{time.time()-t0:.1f}s")
# strings: every BMP code point except surrogates, alone and in text
badc = []
for cp in list(range(0, 0xD800)) + list(range(0xE000, 0x110000, 97)):
    s = "a" + chr(cp) + "b"
    if orjson.dumps(s) != pydantic_core.to_json(s):
        badc.append(hex(cp))
print("strings differing orjson vs pydantic:", len(badc), badc[:20])
badm = [hex(cp) for cp in range(0, 0x800) if msgspec.json.encode(chr(cp)) != pydantic_core.to_json(chr(cp))]
print("strings differing msgspec vs pydantic (<0x800):", len(badm), badm[:10])
# ints
for v in [2**63-1, 2**63, 2**64-1, 2**64, -2**63, -2**63-1]:
    try: o = orjson.dumps(v)
    except Exception as e: o = type(e).__name__
    print(v, pydantic_core.to_json(v), o)
# dict key order, non-str keys
print(orjson.dumps({"b":1,"a":2}), pydantic_core.to_json({"b":1,"a":2}))
