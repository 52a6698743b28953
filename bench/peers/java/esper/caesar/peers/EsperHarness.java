package caesar.peers;

import com.espertech.esper.common.client.EPCompiled;
import com.espertech.esper.common.client.EventSender;
import com.espertech.esper.common.client.configuration.Configuration;
import com.espertech.esper.compiler.client.CompilerArguments;
import com.espertech.esper.compiler.client.EPCompilerProvider;
import com.espertech.esper.runtime.client.EPDeployment;
import com.espertech.esper.runtime.client.EPEventService;
import com.espertech.esper.runtime.client.EPRuntime;
import com.espertech.esper.runtime.client.EPRuntimeProvider;
import com.espertech.esper.runtime.client.EPStatement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** Esper side of the peer benchmark. A workload is one EPL module; every
 * statement named q<N> (@name('q12')) is a query whose rows are matches: its
 * select list is the tagged events in component order (a repeated tag is an
 * array). Optional first line "// flush=N": after the last event, time is
 * advanced by N so that timers (end negation) fire.
 *
 * Esper runs with external time (internal timer off): before each event the
 * runtime clock is advanced to the event's timestamp, so `timer:within` and
 * `timer:schedule` count in event time, each timer firing at its own time. Single-threaded: locking and ordered
 * dispatch off; rows reach a subscriber (no EventBean wrapping of output). */
public final class EsperHarness implements Harness.Engine {
    static final int TYPES = 20;
    private static final Pattern FLUSH = Pattern.compile("^//\\s*flush=(\\d+)");
    // "// stream=Ev": send every event as type Ev (one stream) instead of E<type>
    private static final Pattern STREAM = Pattern.compile("(?m)^//\\s*stream=Ev\\s*$");
    private static final Pattern QUERY = Pattern.compile("^q(\\d+)$");
    // statements per compiled module: Janino cannot compile one module class
    // holding thousands of statements (its methods outgrow the JVM's 64 KB)
    static final int CHUNK = 250;
    private final Map<String, List<EPCompiled>> compiled = new HashMap<>();
    private int runtimes;

    static Configuration configuration() {
        Configuration config = new Configuration();
        for (int t = 0; t < TYPES; t++) {
            config.getCommon().addEventType("E" + t, Ev.class);
        }
        // every event as one stream, for match_recognize (see STREAM)
        config.getCommon().addEventType("Ev", Ev.class);
        config.getRuntime().getThreading().setInternalTimerEnabled(false);
        config.getRuntime().getThreading().setListenerDispatchPreserveOrder(false);
        config.getRuntime().getThreading().setInsertIntoDispatchPreserveOrder(false);
        config.getRuntime().getThreading().setNamedWindowConsumerDispatchPreserveOrder(false);
        config.getRuntime().getExecution().setDisableLocking(true);
        config.getCompiler().getByteCode().setAllowSubscriber(true);
        return config;
    }

    /** Subscriber: one row per match; its event columns (Ev, or Ev[] for a
     * repeated tag) in order are the match. */
    public static final class Sink {
        private final int query;
        private final Matches matches;

        Sink(int query, Matches matches) {
            this.query = query;
            this.matches = matches;
        }

        public void update(Object[] row) {
            int n = 0;
            for (Object o : row) {
                if (o instanceof Ev) {
                    n++;
                } else if (o instanceof Ev[]) {
                    n += ((Ev[]) o).length;
                }
            }
            matches.begin(query, n);
            for (Object o : row) {  // other columns (projected values) are not part of the match
                if (o instanceof Ev) {
                    matches.put(((Ev) o).seq);
                } else if (o instanceof Ev[]) {
                    for (Ev e : (Ev[]) o) {
                        matches.put(e.seq);
                    }
                }
            }
        }
    }

    /** One module, or (many statements, one per line, no `create`) chunks of CHUNK. */
    static List<EPCompiled> compile(String epl, Configuration config) throws Exception {
        List<String> statements = new ArrayList<>();
        for (String line : epl.split("\n")) {
            if (!line.isBlank() && !line.startsWith("//")) {
                statements.add(line);
            }
        }
        List<EPCompiled> out = new ArrayList<>();
        if (statements.size() <= CHUNK || epl.contains("create ")) {
            out.add(EPCompilerProvider.getCompiler().compile(epl, new CompilerArguments(config)));
            return out;
        }
        for (int i = 0; i < statements.size(); i += CHUNK) {
            String chunk = String.join("\n", statements.subList(i, Math.min(i + CHUNK, statements.size())));
            out.add(EPCompilerProvider.getCompiler().compile(chunk, new CompilerArguments(config)));
        }
        return out;
    }

    @Override
    public void run(String epl, Ev[] events, Matches matches, Harness.Timing t) throws Exception {
        long setup0 = System.nanoTime();
        Configuration config = configuration();
        List<EPCompiled> modules = compiled.get(epl);
        if (modules == null) {
            modules = compile(epl, config);
            compiled.clear();  // one workload at a time stays compiled
            compiled.put(epl, modules);
        }
        long flush = 1;
        Matcher fm = FLUSH.matcher(epl);
        if (fm.find()) {
            flush = Long.parseLong(fm.group(1));
        }
        EPRuntime runtime = EPRuntimeProvider.getRuntime("peers-" + (runtimes++), config);
        try {
            EPEventService es = runtime.getEventService();
            long cur = events.length > 0 ? events[0].ts : 0;
            es.advanceTime(cur);
            for (EPCompiled module : modules) {
                EPDeployment dep = runtime.getDeploymentService().deploy(module);
                for (EPStatement s : dep.getStatements()) {
                    Matcher qm = QUERY.matcher(s.getName());
                    if (qm.matches()) {
                        s.setSubscriber(new Sink(Integer.parseInt(qm.group(1)), matches));
                    }
                }
            }
            EventSender[] senders = new EventSender[TYPES];
            boolean single = STREAM.matcher(epl).find();
            for (int i = 0; i < TYPES; i++) {
                senders[i] = es.getEventSender(single ? "Ev" : "E" + i);
            }
            t.setupNs = System.nanoTime() - setup0;
            t.start();
            for (Ev e : events) {
                if (e.ts != cur) {
                    // over a gap, step through the timers due in it, each at
                    // its own time (advanceTime alone would fire them all at
                    // e.ts, with time windows already expired to e.ts)
                    if (e.ts == cur + 1) {
                        es.advanceTime(e.ts);
                    } else {
                        es.advanceTimeSpan(e.ts);
                    }
                    cur = e.ts;
                }
                senders[e.type].sendEvent(e);
            }
            es.advanceTimeSpan(cur + flush);
            t.stop();
        } finally {
            runtime.destroy();
        }
    }

    public static void main(String[] args) throws Exception {
        Harness.serve(new EsperHarness());
    }
}
