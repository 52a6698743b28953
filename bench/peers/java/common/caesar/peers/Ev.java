package caesar.peers;

/** One event of the shared event file: a JavaBean for Esper (getters) and a
 * POJO for Flink (public fields, no-argument constructor). `type` is the SASE
 * event type number (E0..E19), `seq` the arrival number every engine reports
 * matches by. */
public final class Ev {
    public long seq;
    public long ts;
    public int type;
    public long attr1, attr2, attr3, attr4, attr5;

    public Ev() {}

    public long getSeq() { return seq; }
    public long getTs() { return ts; }
    public int getType() { return type; }
    public long getAttr1() { return attr1; }
    public long getAttr2() { return attr2; }
    public long getAttr3() { return attr3; }
    public long getAttr4() { return attr4; }
    public long getAttr5() { return attr5; }

    public long attr(int i) {
        switch (i) {
            case 1: return attr1;
            case 2: return attr2;
            case 3: return attr3;
            case 4: return attr4;
            case 5: return attr5;
            default: throw new IllegalArgumentException("attr" + i);
        }
    }

    @Override
    public String toString() {
        return "E" + type + "#" + seq + "@" + ts;
    }
}
