// Run with Java's single-file source launcher against Kafka's jars:
//   java -cp '<kafka libs>/*' tests/java/AdminProbe.java CASE=PROPS=BOOTSTRAP ...
// For each case, Kafka's own AdminClient (the reference client) connects with
// the client properties file PROPS to BOOTSTRAP and asks describeCluster();
// one line per case on stdout: "CASE OK <cluster id>" or
// "CASE EXC <exception class> <message>", so tests can see exactly which
// exception and message the Java client gets.
import java.io.FileInputStream;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;

public class AdminProbe {
    public static void main(String[] args) throws Exception {
        for (String arg : args) {
            String[] parts = arg.split("=", 3);
            Properties props = new Properties();
            try (FileInputStream in = new FileInputStream(parts[1])) {
                props.load(in);
            }
            props.put("bootstrap.servers", parts[2]);
            props.put("default.api.timeout.ms", "10000");
            props.put("request.timeout.ms", "5000");
            String line;
            try (Admin admin = Admin.create(props)) {
                line = "OK " + admin.describeCluster().clusterId().get();
            } catch (ExecutionException e) {
                Throwable cause = e.getCause();
                line = "EXC " + cause.getClass().getName() + " " + cause.getMessage();
            }
            System.out.println(parts[0] + " " + line);
            System.out.flush();
        }
    }
}
