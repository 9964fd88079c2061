/*
 * Runs Debian's JMeter 2.13 with its XStream allow-list opened.
 *
 * Why this exists: Debian ships JMeter 2.13 with XStream 1.4.20, which
 * denies every class not on its allow-list, JMeter's own included, so that
 * JMeter cannot load any test plan ("ForbiddenClassException ...
 * ScriptWrapper"); and it still exits 0. JMeter 5.x has its own allow-list
 * and needs none of this: run `jmeter` itself there.
 *
 * What it does: lets NewDriver build JMeter's class loader, initializes
 * JMeter's SaveService in it, allows any type on its two XStream instances
 * (the plan and the results file; both are ours), then hands over to
 * NewDriver.main with the original arguments. Reflection only, so it
 * compiles without JMeter on the class path. Used by jmeter/run.sh.
 */
import java.lang.reflect.Field;
import java.lang.reflect.Method;

public final class OpenXStream {
    private OpenXStream() {}

    public static void main(String[] args) throws Exception {
        Class<?> driver = Class.forName("org.apache.jmeter.NewDriver");
        Field loaderField = driver.getDeclaredField("loader");
        loaderField.setAccessible(true);
        ClassLoader loader = (ClassLoader) loaderField.get(null);
        Thread.currentThread().setContextClassLoader(loader);

        String home = (String) driver.getMethod("getJMeterDir").invoke(null);
        Class<?> utils = Class.forName("org.apache.jmeter.util.JMeterUtils", true, loader);
        utils.getMethod("setJMeterHome", String.class).invoke(null, home);

        Class<?> permission = Class.forName(
            "com.thoughtworks.xstream.security.TypePermission", true, loader);
        Object any = Class.forName(
            "com.thoughtworks.xstream.security.AnyTypePermission", true, loader)
            .getField("ANY").get(null);
        Class<?> saveService = Class.forName("org.apache.jmeter.save.SaveService", true, loader);
        for (String name : new String[] {"JMXSAVER", "JTLSAVER"}) {
            Field field = saveService.getDeclaredField(name);
            field.setAccessible(true);
            Object xstream = field.get(null);
            Method allow = xstream.getClass().getMethod("addPermission", permission);
            allow.invoke(xstream, any);
        }
        driver.getMethod("main", String[].class).invoke(null, (Object) args);
    }
}
