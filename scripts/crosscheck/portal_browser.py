"""Drives hookd's delivery log portal in headless chromium, as a support person would.

Usage: portal_browser.py BASE_URL CHROMIUM CHROMEDRIVER ADMIN_TOKEN APP_TOKEN APP_ID OTHER_APP_ID
                         FAILED_MSG_ID PAYLOAD APP_PORTAL_TOKEN OTHER_PORTAL_TOKEN
                         CUSTOMER_RECEIVER_URL OTHER_ENDPOINT_ID

Run by crates/hookd/tests/portal_browser.rs against a real `hookd serve` whose application
APP_ID has one failed message (FAILED_MSG_ID, published as the exact bytes PAYLOAD) to a
receiver that now answers 200, and OTHER_APP_ID a Kafka destination `orders-stream` with one
delivered message and an HTTP endpoint OTHER_ENDPOINT_ID with a week of history. Then, signed
in with APP_ID's portal link (APP_PORTAL_TOKEN), it adds an endpoint to CUSTOMER_RECEIVER_URL,
edits, pauses, resumes and test-sends to it, checking each step through the API with the admin
token, and finds OTHER_ENDPOINT_ID out of reach. With HOOKD_PORTAL_SCREENSHOTS=<dir>, saves the
pages as PNGs.
"""
import json
import os
import re
import sys
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

(BASE, CHROMIUM, DRIVER, ADMIN_TOKEN, APP_TOKEN, APP_ID, OTHER_APP_ID, FAILED, PAYLOAD,
 PORTAL_TOKEN, OTHER_PORTAL_TOKEN, CUSTOMER_RECEIVER, OTHER_ENDPOINT) = sys.argv[1:14]
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


def api(path):
    """GET an API path with the admin token: what the pages did, as hookd holds it."""
    request = urllib.request.Request(f"{BASE}/api/v1{path}",
                                     headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def shown_notice(text):
    """Waits for a notice on the page that contains `text`."""
    wait.until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, "main"), text))


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
    wait.until(EC.presence_of_element_located((By.XPATH, "//h2[.='Health']")))
    stats = driver.find_element(By.CSS_SELECTOR, "dl.stats").text
    check(re.search(r"Success rate, 24 hours\s+80%", stats) and re.search(r"Attempts, 24 hours\s+5", stats),
          f"4 of 5 attempts succeeded: {stats!r}")
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
    # A customer signs in with its portal link and looks after its own endpoints.
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    driver.find_element(By.ID, "sign-out").click()
    heading("Sign in")
    driver.get(f"{BASE}/portal/login#token={PORTAL_TOKEN}")
    heading("Acme Shop")
    wait.until(EC.presence_of_element_located((By.XPATH, "//section[@aria-label='Delivery health of this application']")))
    driver.find_element(By.LINK_TEXT, "Add an endpoint").click()
    heading("Add an endpoint")
    picker = driver.find_element(By.CSS_SELECTOR, "fieldset.picker")
    check("An order left the warehouse" in picker.text and "A customer placed an order" in picker.text,
          "the catalog's event types are offered with their descriptions")
    shipped = picker.find_element(By.XPATH, ".//div[@class='pick'][.//input[@value='order.shipped']]")
    example = shipped.find_element(By.XPATH, ".//summary[.='Example payload']")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", example)
    example.click()
    check(json.loads(shipped.find_element(By.TAG_NAME, "pre").text) == {"orderId": 1001},
          "an event type's example payload is offered with it")

    # The API's validation message appears beside the field it names.
    by_label("URL").send_keys("not a url")
    button("Add endpoint").click()
    url_error = wait.until(EC.visibility_of_element_located(
        (By.XPATH, "//input[@name='url']/following-sibling::p[contains(@class, 'field-error')]")))
    check(url_error.text.strip() != "", "the URL's error is shown beside it")
    check(by_label("URL").get_attribute("aria-invalid") == "true", "the URL field is marked invalid")
    check(url_error.get_attribute("id") in by_label("URL").get_attribute("aria-describedby"),
          "the error describes the field for screen readers")
    shot("endpoint-form")

    # Add an endpoint with two event types.
    by_label("URL").clear()
    by_label("URL").send_keys(CUSTOMER_RECEIVER)
    by_label("Description").send_keys("Shipping sync")
    for name in ("order.shipped", "order.created"):
        box = driver.find_element(By.XPATH, f"//input[@type='checkbox'][@value='{name}']")
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", box)
        box.click()
    button("Add endpoint").click()
    heading(CUSTOMER_RECEIVER)
    shown_notice("Endpoint added.")
    endpoint_id = driver.execute_script("return location.hash").split("/endpoint/")[1]
    ep = api(f"/app/{APP_ID}/endpoint/{endpoint_id}")
    check(sorted(ep["eventTypes"]) == ["order.created", "order.shipped"] and ep["description"] == "Shipping sync",
          f"the API holds the new endpoint: {ep}")

    # Edit it: its description, a rate limit, a ceiling on requests in flight, a header.
    driver.find_element(By.LINK_TEXT, "Edit endpoint").click()
    heading(f"Edit {CUSTOMER_RECEIVER}")
    by_label("Description").clear()
    by_label("Description").send_keys("Shipping sync, edited")
    by_label("Rate limit").send_keys("50")
    by_label("Requests in flight").send_keys("3")
    by_label("Custom headers").send_keys("X-Team: shipping")
    button("Save changes").click()
    heading(CUSTOMER_RECEIVER)
    shown_notice("Endpoint saved.")
    ep = api(f"/app/{APP_ID}/endpoint/{endpoint_id}")
    check(ep["description"] == "Shipping sync, edited" and ep["rateLimit"] == 50 and ep["maxConcurrency"] == 3,
          f"the API holds the edit: {ep}")
    headers = api(f"/app/{APP_ID}/endpoint/{endpoint_id}/headers")
    check(headers["headers"].get("X-Team") == "shipping", f"the header is saved: {headers}")

    # Pause it, then resume it.
    button("Pause endpoint").click()
    shown_notice("Endpoint paused.")
    wait.until(lambda d: d.find_elements(By.XPATH, "//button[normalize-space(.)='Resume endpoint']"))
    check(api(f"/app/{APP_ID}/endpoint/{endpoint_id}")["disabled"] is True, "the API holds it paused")
    button("Resume endpoint").click()
    shown_notice("Endpoint resumed.")
    wait.until(lambda d: d.find_elements(By.XPATH, "//button[normalize-space(.)='Pause endpoint']"))
    check(api(f"/app/{APP_ID}/endpoint/{endpoint_id}")["disabled"] is False, "the API holds it resumed")

    # A test event of a chosen type reaches the receiver on loopback; the attempt is shown.
    Select(by_label("Event type")).select_by_visible_text("order.created")
    button("Send test event").click()
    shown_notice("delivered: HTTP 200")
    attempts = api(f"/app/{APP_ID}/attempt/endpoint/{endpoint_id}")["data"]
    check(len(attempts) == 1 and attempts[0]["status"] == 0 and attempts[0]["responseStatusCode"] == 200,
          f"the API holds one successful attempt: {attempts}")
    sent = api(f"/app/{APP_ID}/msg/{attempts[0]['msgId']}")
    check(sent["eventType"] == "order.created", f"the test event has the chosen type: {sent}")
    driver.refresh()
    heading(CUSTOMER_RECEIVER)
    row = wait.until(EC.presence_of_element_located(
        (By.XPATH, "//caption[contains(., 'latest attempts')]/ancestor::table//tbody/tr")))
    check("Succeeded" in row.text and "HTTP 200" in row.text, f"the attempt is listed: {row.text}")

    # Another customer's endpoint is out of reach, by any address.
    for address, answer in ((f"#/app/{OTHER_APP_ID}/endpoint/{OTHER_ENDPOINT}", "application not found"),
                            (f"#/app/{APP_ID}/endpoint/{OTHER_ENDPOINT}", "endpoint not found"),
                            (f"#/app/{APP_ID}/endpoint/{OTHER_ENDPOINT}/edit", "endpoint not found")):
        driver.get(f"{BASE}/portal/#/")
        heading("Acme Shop")
        driver.get(f"{BASE}/portal/{address}")
        heading("Something went wrong")
        check(answer in driver.find_element(By.TAG_NAME, "main").text, f"{address}: {answer}")
    other = api(f"/app/{OTHER_APP_ID}/endpoint/{OTHER_ENDPOINT}")
    check(other["description"] == "Invoices to the ledger" and other["disabled"] is False,
          f"the other customer's endpoint is untouched: {other}")

    # The other customer's endpoint page: a week of history at a glance.
    driver.find_element(By.ID, "sign-out").click()
    heading("Sign in")
    driver.get(f"{BASE}/portal/login#token={OTHER_PORTAL_TOKEN}")
    heading("Globex")
    driver.get(f"{BASE}/portal/#/app/{OTHER_APP_ID}/endpoint/{OTHER_ENDPOINT}")
    wait.until(EC.presence_of_element_located((By.XPATH, "//h2[.='Health']")))
    charts = driver.find_elements(By.CSS_SELECTOR, "svg.chart[role='img']")
    check(len(charts) == 2, "a chart for the day and one for the week")
    health = api(f"/app/{OTHER_APP_ID}/endpoint/{OTHER_ENDPOINT}/health")
    day_title = charts[0].find_element(By.TAG_NAME, "title").get_attribute("textContent")
    day = health["day"]
    expected = f"{day['successfulAttempts']} succeeded, {day['attempts'] - day['successfulAttempts']} failed"
    check(expected in day_title, f"the chart's title says the day's figures: {day_title!r}, {expected!r}")
    check(health["oldestPending"]["msgId"] in body_text(), "the oldest waiting message is named")
    shot("endpoint-health")
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True})
    overflow = driver.execute_script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth")
    check(overflow <= 0, f"no sideways scrolling of the endpoint page at phone width ({overflow}px too wide)")
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    shot("endpoint-phone", 390)

    print("portal browser check passed")
except TimeoutException as error:
    raise AssertionError(f"timed out: {error.msg}\n--- page ---\n{body_text()}") from None
finally:
    driver.quit()
