"""Drives hookd's delivery log portal in headless chromium, as a support person would.

Usage: portal_browser.py BASE_URL CHROMIUM CHROMEDRIVER ADMIN_TOKEN APP_TOKEN APP_ID OTHER_APP_ID
                         FAILED_MSG_ID PAYLOAD

Run by crates/hookd/tests/portal_browser.rs against a real `hookd serve` whose application
APP_ID has one failed message (FAILED_MSG_ID, published as the exact bytes PAYLOAD) to a
receiver that now answers 200, and OTHER_APP_ID a Kafka destination `orders-stream` with one
delivered message. With HOOKD_PORTAL_SCREENSHOTS=<dir>, saves the pages as PNGs.
"""
import json
import os
import sys

from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

(BASE, CHROMIUM, DRIVER, ADMIN_TOKEN, APP_TOKEN, APP_ID, OTHER_APP_ID, FAILED, PAYLOAD) = sys.argv[1:10]
SHOTS = os.environ.get("HOOKD_PORTAL_SCREENSHOTS")


def start_browser():
    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1000", "--force-device-scale-factor=1", "--lang=en-US"):
        options.add_argument(arg)
    return webdriver.Chrome(options=options, service=Service(executable_path=DRIVER))


driver = start_browser()
wait = WebDriverWait(driver, 30)


def shot(name, width=1280):
    """Saves the whole page at `width` CSS pixels as docs-ready portal-NAME.png."""
    if not SHOTS:
        return
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": 800, "deviceScaleFactor": 1, "mobile": width < 600})
    full = driver.execute_script("return document.documentElement.scrollHeight")
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": min(full, 2400), "deviceScaleFactor": 1, "mobile": width < 600})
    driver.save_screenshot(os.path.join(SHOTS, f"portal-{name}.png"))
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def heading(text):
    """Waits for the page's h1 to read `text`."""
    wait.until(EC.text_to_be_present_in_element((By.TAG_NAME, "h1"), text))


def by_label(text):
    """The form control whose <label> starts with `text` (how a screen reader finds it)."""
    label = wait.until(EC.presence_of_element_located(
        (By.XPATH, f"//label[starts-with(normalize-space(.), '{text}')]")))
    return driver.find_element(By.ID, label.get_attribute("for"))


def button(text, within=None):
    scope = within or driver
    return scope.find_element(By.XPATH, f".//button[normalize-space(.)='{text}']")


def body_text():
    return driver.find_element(By.TAG_NAME, "body").text


def check(condition, message):
    if not condition:
        raise AssertionError(f"{message}\n--- page ---\n{body_text()}")


try:
    # Sign in with the admin token.
    driver.get(f"{BASE}/portal/")
    heading("Sign in")
    shot("login")
    by_label("API token").send_keys(ADMIN_TOKEN)
    button("Sign in").click()
    heading("Applications")
    driver.find_element(By.LINK_TEXT, "Acme Shop").click()
    heading("Acme Shop")

    # The message list says, per message, whether it went out.
    listed = "//caption[contains(., 'Messages, newest first')]/ancestor::table//tbody/tr"
    wait.until(EC.presence_of_element_located((By.XPATH, listed)))
    rows = driver.find_elements(By.XPATH, listed)
    check(len(rows) == 4, f"four messages listed, not {len(rows)}")
    for row in rows:
        expected = "Failed 1/1" if FAILED in row.text else "Delivered 1/1"
        check(expected in row.text, f"the row says {expected}: {row.text}")

    # Find the failed message.
    Select(by_label("Delivery status")).select_by_visible_text("Failed")
    button("Search").click()
    wait.until(EC.presence_of_element_located((By.XPATH, "//caption[contains(., 'Matching messages')]")))
    rows = driver.find_elements(By.CSS_SELECTOR, "table:has(caption) tbody tr")
    found = [r for r in rows if FAILED in r.text]
    check(len(found) == 1, f"the failed message {FAILED} is listed once")
    check(len(driver.find_elements(By.XPATH, "//caption[contains(., 'Matching')]/ancestor::table//tbody/tr")) == 1,
          "only the failed message matches")
    shot("search")
    driver.find_element(By.LINK_TEXT, FAILED).click()
    heading(f"Message {FAILED}")

    # Its delivery failed once; the exact bytes are available.
    delivery = wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "section.delivery")))
    check("Failed" in delivery.text and "HTTP 500" in delivery.text, "the failed attempt is shown")
    button("Show exact bytes").click()
    exact = driver.find_element(By.CSS_SELECTOR, "pre[aria-label='Payload, exact bytes']")
    check(exact.text == PAYLOAD, f"exact bytes shown: {exact.text!r} != {PAYLOAD!r}")
    button("Show exact bytes").click()

    # Resend it, and see the new successful attempt appear without reloading.
    button("Resend to this endpoint", delivery).click()
    wait.until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, "section.delivery"), "The resend succeeded: HTTP 200"))
    delivery = driver.find_element(By.CSS_SELECTOR, "section.delivery")
    attempt_rows = delivery.find_elements(By.CSS_SELECTOR, "tbody tr")
    check(len(attempt_rows) == 2, "two attempts: the failure and the resend")
    check("Succeeded" in attempt_rows[0].text and "HTTP 200" in attempt_rows[0].text
          and "Manual" in attempt_rows[0].text, "the newest attempt is the manual success")
    check("Delivered" in delivery.text, "the delivery now reads delivered")
    shot("message")

    # The endpoint page: status, the day's success rate, actions.
    delivery.find_element(By.TAG_NAME, "h3").find_element(By.TAG_NAME, "a").click()
    wait.until(EC.presence_of_element_located((By.XPATH, "//h2[.='Last 24 hours']")))
    stats = driver.find_element(By.CSS_SELECTOR, "dl.stats").text
    check("80%" in stats and "4 of 5 succeeded" in stats, f"4 of 5 attempts succeeded: {stats!r}")
    button("Reveal secret").click()
    secret = wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "code.secret")))
    check(secret.text.startswith("whsec_"), "the secret is revealed")
    button("Hide secret").click()
    shot("endpoint")
    button("Rotate secret").click()
    driver.switch_to.alert.accept()
    wait.until(lambda d: "New secret" in body_text() or "cannot rotate secrets" in body_text())

    # The event-type catalog: the list, then one event type's schema and example payload.
    driver.find_element(By.ID, "nav-event-types").click()
    heading("Event types")
    driver.find_element(By.LINK_TEXT, "order.shipped").click()
    heading("order.shipped")
    wait.until(lambda d: "Example payload" in body_text())
    shown = [json.loads(pre.text) for pre in driver.find_elements(By.CSS_SELECTOR, "main pre")]
    check(shown[1] == {"orderId": 1001}, f"the example follows the schema: {shown}")

    # Globex's Kafka destination: listed with the application, its log shows the broker's
    # acknowledgement, its configuration no credential.
    driver.get(f"{BASE}/portal/#/app/{OTHER_APP_ID}")
    heading("Globex")
    wait.until(EC.presence_of_element_located((By.LINK_TEXT, "orders-stream")))
    check("kafka" in driver.find_element(
        By.XPATH, "//caption[contains(., 'Destinations')]/ancestor::table").text,
        "the destination's type is listed")
    driver.find_element(By.LINK_TEXT, "orders-stream").click()
    heading("Destination orders-stream")
    attempt = wait.until(EC.presence_of_element_located(
        (By.XPATH, "//caption[contains(., 'attempts to this destination')]/ancestor::table//tbody/tr")))
    check("Succeeded" in attempt.text and "HTTP 200" in attempt.text, f"the attempt succeeded: {attempt.text}")
    attempt.find_element(By.TAG_NAME, "summary").click()
    check("partition" in attempt.text, f"the attempt shows Kafka's acknowledgement: {attempt.text}")
    config = driver.find_element(By.CSS_SELECTOR, "pre[aria-label^='Configuration']").text
    check('"topic": "orders"' in config, f"the configuration is shown: {config}")
    shot("destination")

    # An app-portal link opens one application, and the token leaves the address bar.
    driver.find_element(By.ID, "sign-out").click()
    heading("Sign in")
    driver.get(f"{BASE}/portal/login#token={APP_TOKEN}")
    heading("Acme Shop")
    check("token=" not in driver.current_url, f"the token left the address bar: {driver.current_url}")
    check(driver.find_element(By.ID, "nav-home").text == "Application", "the scoped nav names one application")
    driver.get(f"{BASE}/portal/#/app/{OTHER_APP_ID}")
    wait.until(EC.text_to_be_present_in_element((By.TAG_NAME, "main"), "application not found"))

    # At phone width the message page stays one readable column.
    driver.get(f"{BASE}/portal/#/app/{APP_ID}/msg/{FAILED}")
    heading(f"Message {FAILED}")
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "section.delivery tbody tr")))
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True})
    overflow = driver.execute_script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth")
    check(overflow <= 0, f"no sideways scrolling at phone width ({overflow}px too wide)")
    shot("phone", 390)
    print("portal browser check passed")
except TimeoutException as error:
    raise AssertionError(f"timed out: {error.msg}\n--- page ---\n{body_text()}") from None
finally:
    driver.quit()
